"""How long a runbook reads the cluster back before it calls an action's effect done.

One place for the environment settings every verify step reads, so that the heal, the
decommission, the rebalance and the log-dir failure wait the same way and a deployment (or the
test suite, which shortens them) sets them once:

- ``KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S`` (600): how long the end state may take to appear;
- ``KAFKA_RUNBOOKS_VERIFY_SETTLE_S`` (15): how long it must then hold on every read;
- ``KAFKA_RUNBOOKS_ELECTION_SETTLE_S`` (10): how long the preferred leaders must keep their
  leadership after the election (leadership can move again right after one).

A settle asked for is never held shorter than the cluster's ``broker.session.timeout.ms``
(``kafka_runbooks.evidence.settle_period_s``): a broker killed a moment ago stays registered,
unfenced, leader and in its ISRs until its session times out, so a shorter settle cannot see the
death. Its last read asks the leaders and ISR members of the partitions it judges themselves
(:func:`partitions_ask`). :func:`verify_settle` reads the cluster's setting and says the effective
settle in a decision record ("asked X s, held Y s because broker.session.timeout.ms").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.evidence import ClusterTimeouts, settle_period_s, silent_brokers


def _seconds(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


def verify_timeouts() -> dict[str, float]:
    """``timeout_s`` and ``settle_s`` of a verify step as asked (keyword arguments of the await_* rules;
    :func:`verify_settle` adds the cluster's timeouts that lengthen the settle)."""
    return {
        "timeout_s": _seconds("KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S", 600.0),
        "settle_s": _seconds("KAFKA_RUNBOOKS_VERIFY_SETTLE_S", 15.0),
    }


def election_settle_s() -> float:
    """How long an election's outcome must hold before the preferred leaders count as elected (asked;
    held never shorter than the session timeout)."""
    return _seconds("KAFKA_RUNBOOKS_ELECTION_SETTLE_S", 10.0)


def settle_record(step: str, asked_s: float, timeouts: ClusterTimeouts, logger: logging.Logger) -> float:
    """The settle period a step holds (never shorter than the session timeout), said in a decision
    record: asked X s, held Y s, and why."""
    held = settle_period_s(asked_s, timeouts)
    session_ms = timeouts.broker_session_timeout_ms
    why = (
        f"because broker.session.timeout.ms is {session_ms} ms: a broker killed a moment ago is still "
        "registered, unfenced, leader and in its ISRs until its session times out"
        if held > asked_s
        else f"(broker.session.timeout.ms is {session_ms} ms, shorter)"
    )
    decisions.record(
        step,
        f"settle {held:g} s",
        f"asked {asked_s:g} s, held {held:g} s {why}; the last read asks the leaders and ISR members itself",
        observed={"asked_s": asked_s, "held_s": held, **timeouts.as_dict()},
        logger=logger,
    )
    return held


def verify_settle(admin, step: str, logger: logging.Logger) -> dict[str, Any]:
    """A verify step's keyword arguments: ``timeout_s``, the ``settle_s`` asked and the cluster's
    ``timeouts`` (read now; unknown is refused: no settle can be judged), the effective settle recorded."""
    asked = verify_timeouts()
    timeouts = admin.cluster_timeouts()
    settle_record(step, asked["settle_s"], timeouts, logger)
    return {**asked, "timeouts": timeouts}


def partitions_ask(admin, partitions_of: Callable[[Any], Iterable]) -> Callable[[Any], dict[int, str]]:
    """The settle's last ask: of the partitions a read judges (``partitions_of(answer)``), every leader
    and ISR member asked for its own answer (``evidence.silent_brokers``); ``{broker: why}`` of the
    silent ones (a silent one starts the settle again)."""

    def ask(answer: Any) -> dict[int, str]:
        """The brokers the read relies on that do not answer themselves now."""
        nodes: set[int] = set()
        for p in partitions_of(answer):
            nodes.update(p.isr)
            if p.has_leader:
                nodes.add(p.leader)
        return silent_brokers(admin, nodes) if nodes else {}

    return ask
