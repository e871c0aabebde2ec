"""What a rolling restart keeps between two steps: its options, each node's progress, the plan.

The state file (:meth:`RollState.to_json`) is the roll's checkpoint: a sensor in reschedule
mode reads it at every poke, and a cleared or killed run resumes from it. The phase names
and the role names are stored in it, so they never change.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput, RunbookFailed
from kafka_runbooks.restart.lanes import ALONE, in_turn, stages_text

BROKER = "broker"
CONTROLLER = "controller"
WAIT_READY, CHECK, RESTART, WAIT_BACK, WAIT_ISR, DONE = (
    "wait_ready",
    "check_availability",
    "restart",
    "wait_back",
    "wait_isr",
    "done",
)


class RollFailed(RunbookFailed):
    """The roll stopped; the message is the reason an operator reads first."""


class RollInputError(BadInput):
    """The request itself is wrong (unknown node, empty list): nothing was touched."""


@dataclass
class RollOptions:
    operation_timeout_s: float = 300.0
    max_attempts: int = 10
    allow_force_restart: bool = False
    dry_run: bool = False
    # a broker and a follower controller in flight together (restart.lanes); False: one node
    # at a time. A state file without it was planned one node at a time (see from_json)
    overlap: bool = True


@dataclass
class NodeProgress:
    node_id: int
    role: str
    phase: str = WAIT_READY
    phase_since_ms: int = 0
    attempts: int = 0
    restarts: int = 0
    restarted_at_ms: int = 0
    last_reading: dict = field(default_factory=dict)
    # the last recovery counts any source reported, with when (they come and go)
    last_counts: dict = field(default_factory=dict)
    # restart evidence read just before the restart request, and the latest
    evidence_before: dict = field(default_factory=dict)
    last_evidence: dict = field(default_factory=dict)
    # partitions whose ISR it was in just before its restart (None: not known)
    isr_before: list[str] | None = None
    # why the restart counts as observed (empty until there is evidence)
    restart_observed: str = ""
    # when it was last seen starting: "stuck" needs a whole operation timeout after that
    last_starting_ms: int = 0
    # a controller: the quorum leader's log end offset once its new process was seen (None:
    # not yet); it is back when the leader reports it fetching past this offset
    quorum_offset_at_restart: int | None = None
    # restart.lanes: "broker", "controller" or "alone"; nodes of an old state file roll alone
    lane: str = ALONE


@dataclass
class RollState:
    reason: str
    order: list[int]
    nodes: dict[int, NodeProgress]
    options: RollOptions
    # what the availability check saw per node at planning time (the gate shows it)
    gate_rows: list[dict] = field(default_factory=list)

    def current(self) -> NodeProgress | None:
        """The first node in roll order not yet done, or None when the roll is over."""
        return next((self.nodes[n] for n in self.order if self.nodes[n].phase != DONE), None)

    def in_turn(self) -> list[NodeProgress]:
        """The nodes the roll works on now: one, or a broker and a controller (``restart.lanes``)."""
        return in_turn(self.order, self.nodes, DONE)

    def in_flight(self) -> list[NodeProgress]:
        """Nodes asked to restart (or about to be) and not yet back in sync."""
        return [self.nodes[n] for n in self.order if self.nodes[n].phase in (RESTART, WAIT_BACK, WAIT_ISR)]

    @property
    def stages_text(self) -> str:
        """The plan as it will be executed: which nodes roll alone, which side by side."""
        return stages_text(self.order, {n: p.lane for n, p in self.nodes.items()})

    @property
    def finished(self) -> bool:
        """Whether every node of the roll is done."""
        return self.current() is None

    def to_json(self) -> str:
        """The roll's progress as the state file keeps it between tasks (read back by :meth:`from_json`)."""
        return json.dumps(
            {
                "reason": self.reason,
                "order": self.order,
                "nodes": {str(k): asdict(v) for k, v in self.nodes.items()},
                "options": asdict(self.options),
                "gate_rows": self.gate_rows,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> RollState:
        """Read the state file written by :meth:`to_json`. Older files lack ``gate_rows``, and
        lanes and ``overlap``: their roll was planned (and approved) one node at a time, so it
        resumes that way."""
        data = json.loads(text)
        return cls(
            reason=data["reason"],
            order=[int(n) for n in data["order"]],
            nodes={int(k): _node_progress(v) for k, v in data["nodes"].items()},
            options=_options(data["options"]),
            gate_rows=data.get("gate_rows", []),
        )


def _options(data: dict) -> RollOptions:
    """A roll's options from a state file, old or new: a file without ``overlap`` was planned one
    node at a time; keys this roller does not know are dropped (``quorum_max_lag_ms``: the quorum's
    catch-up is judged by the cluster's own fetch timeout now)."""
    known = set(RollOptions.__dataclass_fields__)
    return RollOptions(**{"overlap": False, **{k: v for k, v in data.items() if k in known}})


def _node_progress(data: dict) -> NodeProgress:
    """A node's progress from a state file, old or new: keys a newer roller added take their
    defaults, keys this roller does not know are dropped."""
    known = set(NodeProgress.__dataclass_fields__)
    return NodeProgress(**{k: v for k, v in data.items() if k in known})


def ms_text(value) -> str:
    """A lag or an offset as text: "unknown" for None, never 0."""
    return "unknown" if value is None else str(value)


class NodeWork:
    """What every part of the roll that works on a node shares: the clock its phase times are
    read from (a test's fake clock, or the wall clock in ms) and the decision records it writes
    about the node, so each part says and times things the same way."""

    def __init__(self, clock: Callable[[], int] | None = None, logger: logging.Logger | None = None) -> None:
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.log = logger or logging.getLogger("kafka_runbooks.restart.roller")

    def _elapsed_s(self, node: NodeProgress) -> float:
        """Seconds the node has been in its current phase (by the roll's clock)."""
        return (self.clock() - node.phase_since_ms) / 1000

    def _enter(self, node: NodeProgress, phase: str) -> None:
        """Move the node to ``phase``, its timer starting now."""
        node.phase = phase
        node.phase_since_ms = self.clock()

    def _record(self, step: str, node: NodeProgress, decision: str, reason: str, **kw) -> None:
        """A decision record about the node (subject: its role and id)."""
        decisions.record(step, decision, reason, subject=f"{node.role} {node.node_id}", logger=self.log, **kw)
