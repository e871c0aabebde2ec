"""How long a runbook reads the cluster back before it calls an action's effect done.

One place for the environment settings every verify step reads, so that the heal, the
decommission, the rebalance and the log-dir failure wait the same way and a deployment (or the
test suite, which shortens them) sets them once:

- ``KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S`` (600): how long the end state may take to appear;
- ``KAFKA_RUNBOOKS_VERIFY_SETTLE_S`` (15): how long it must then hold on every read;
- ``KAFKA_RUNBOOKS_ELECTION_SETTLE_S`` (10): how long the preferred leaders must keep their
  leadership after the election (leadership can move again right after one).
"""

from __future__ import annotations

import os


def _seconds(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


def verify_timeouts() -> dict[str, float]:
    """``timeout_s`` and ``settle_s`` of a verify step (keyword arguments of the await_* rules)."""
    return {
        "timeout_s": _seconds("KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S", 600.0),
        "settle_s": _seconds("KAFKA_RUNBOOKS_VERIFY_SETTLE_S", 15.0),
    }


def election_settle_s() -> float:
    """How long an election's outcome must hold before the preferred leaders count as elected."""
    return _seconds("KAFKA_RUNBOOKS_ELECTION_SETTLE_S", 10.0)
