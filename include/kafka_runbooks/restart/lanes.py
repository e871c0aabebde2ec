"""Which nodes of a roll may be in flight together: the roll's two lanes.

With dedicated controllers (``process.roles=controller``) and brokers
(``process.roles=broker``), one FOLLOWER controller restarting beside one broker keeps both
invariants a one-at-a-time roll keeps: at most one voter away (the controller's check that
every other voter is live and caught up still runs before its restart) and at most one
broker away (the broker's min-ISR check still runs before its restart). So the roll steps
a broker lane and a controller lane side by side, each one node at a time with the same
phases and checks. A node restarts alone (nothing else in flight) when:

- it leads the quorum (the active controller): a broker's controlled shutdown and its
  registration need it, so no broker may be in flight while it is away;
- it is both broker and controller (a combined node): it is in both lanes at once;
- it was not ready when the roll was planned: what it is doing is not known, and today's
  roll waits for it first, alone, before touching anything else;
- the run asked for one node at a time.

Overlap is the default: it is what a Kafka operator expects when it is safe, and every
node's own checks still run right before its restart. An old state file (written before
lanes existed) has no lane for its nodes: they load as ``alone``, so a resumed roll goes
on one node at a time, exactly as it was approved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

BROKER_LANE = "broker"
CONTROLLER_LANE = "controller"
ALONE = "alone"


class _Node(Protocol):
    node_id: int
    phase: str
    lane: str


def lane_of(
    node_id: int,
    *,
    is_broker: bool,
    is_controller: bool,
    ready: bool,
    active_controller: int | None,
    overlap: bool,
) -> str:
    """The lane a node rolls in; ``alone`` unless overlapping it is safe by the module's rules
    (an unknown readiness counts as not ready, an unknown active controller makes every
    controller restart alone)."""
    if not overlap or not ready or (is_broker and is_controller):
        return ALONE
    if is_controller:
        return ALONE if active_controller is None or node_id == active_controller else CONTROLLER_LANE
    return BROKER_LANE if is_broker else ALONE


def in_turn(order: Sequence[int], nodes: Mapping[int, _Node], done: str) -> list[_Node]:
    """The nodes the roll works on now, in roll order: the first node not ``done`` if it rolls
    alone; otherwise the first node not done of each lane among those before the next
    ``alone`` node (which waits until both lanes before it are done)."""
    pending = [nodes[n] for n in order if nodes[n].phase != done]
    if not pending:
        return []
    if pending[0].lane == ALONE:
        return [pending[0]]
    first: dict[str, _Node] = {}
    for node in pending:
        if node.lane == ALONE:
            break
        first.setdefault(node.lane, node)
    return [n for n in pending if first.get(n.lane) is n]


def stages(order: Sequence[int], lanes: Mapping[int, str]) -> list[dict[str, list[int]]]:
    """The roll as it will be executed: a list of stages, each either one node alone
    (``{"alone": [n]}``) or the two lanes stepped side by side (``{"broker": [...],
    "controller": [...]}``, each lane one node at a time in that order)."""
    result: list[dict[str, list[int]]] = []
    for n in order:
        lane = lanes.get(n, ALONE)
        if lane == ALONE:
            result.append({ALONE: [n]})
            continue
        if not result or ALONE in result[-1]:
            result.append({BROKER_LANE: [], CONTROLLER_LANE: []})
        result[-1][lane].append(n)
    return result


def stages_text(order: Sequence[int], lanes: Mapping[int, str]) -> str:
    """One line per stage, for the approval gate and the plan's decision record."""
    lines = []
    for i, stage in enumerate(stages(order, lanes), 1):
        if ALONE in stage:
            lines.append(f"{i}. node {stage[ALONE][0]} alone")
            continue
        parts = [
            f"{name}s {' -> '.join(map(str, stage[name]))}"
            for name in (BROKER_LANE, CONTROLLER_LANE)
            if stage[name]
        ]
        together = " side by side with ".join(parts)
        lines.append(f"{i}. {together} (one node at a time in each lane)")
    return "\n".join(lines)
