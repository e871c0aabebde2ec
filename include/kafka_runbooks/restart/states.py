"""The broker-state state machine: what the roller does with a node that is not ready.

One table, used by the roller and written out in docs/runbooks/kafka_broker_restart.md. A
node that has not become ready within the operation timeout is judged by what its
broker-state probe says:

============================================  =============  ==========================================
BrokerState (probe)                           recovery       action
============================================  =============  ==========================================
1 STARTING or 2 RECOVERY                      >0, 0, absent  starting: wait, log progress, never force;
                                                             fail after ``max_attempts`` with the counts
exporter answers, BrokerState not registered  absent         starting (Kafka has not registered it yet)
3 RUNNING (not registered / fenced / not in   any            stuck: fail, or force-restart with
the quorum), 0, 6, 7, 127                                    ``allow_force_restart``
no answer, non-200, unreadable body, no probe none           unknown: as stuck (strimzi-048: fall back
                                                             to the behaviour without a probe)
an answer whose BrokerState is none of        any            unknown, never forced: fail naming the
Kafka's states (1e300, NaN, -1, 2.5, true,                   value (the node answered, and what it
"2", 4)                                                      said cannot be read as stuck)
============================================  =============  ==========================================

Why STARTING too: on Kafka 4.x logs are recovered while BrokerState is still 1; state 2
is only the short wait to be unfenced (FIELD_NOTES). The recovery gauges exist only
while logs load, so "no counts" means "unknown", never "not recovering": a broker in 1
or 2 is never force-restarted, whatever its counts say. strimzi-048 forbids force only
in state 2, because the Strimzi agent sends counts only there; on 4.x that leaves the
recovery in state 1 unprotected, which is exactly the failure the proposal exists to
prevent.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_runbooks.probes import RECOVERY, STARTING, BrokerStateReading

WAIT_STARTING = "starting"
STUCK = "stuck"
UNKNOWN = "unknown"

#: The table above, as rows (state, recovery evidence, action) for the runbook doc and the tests.
TABLE = (
    ("1 STARTING or 2 RECOVERY", "counts > 0, 0 or absent", "starting: wait, log progress, never force"),
    ("exporter answers, BrokerState not registered yet", "absent", "starting: wait, never force"),
    ("3 RUNNING but not ready; 0, 6, 7, 127", "any", "stuck: fail, or force with allow_force_restart"),
    ("probe unreachable, non-200, unreadable, none", "none", "unknown: as stuck (strimzi-048)"),
    ("an answer whose BrokerState is none of Kafka's states", "any", "unknown: fail naming it, never force"),
)


@dataclass(frozen=True)
class Assessment:
    kind: str  # WAIT_STARTING, STUCK or UNKNOWN
    state_name: str
    # why no restart may be forced even with allow_force_restart (None: the table's row decides)
    never_force: str | None = None

    @property
    def may_force(self) -> bool:
        """Whether ``allow_force_restart`` may act on this node at all."""
        return self.kind != WAIT_STARTING and self.never_force is None


def assess(reading: BrokerStateReading | None) -> Assessment:
    """Which row of the table a not-ready node's reading falls in."""
    if reading is None:
        return Assessment(UNKNOWN, "not probed")
    if reading.state in (STARTING, RECOVERY):
        return Assessment(WAIT_STARTING, reading.state_name)
    if reading.state is None and reading.state_not_registered:
        return Assessment(WAIT_STARTING, "BrokerState not registered yet")
    if reading.state is None and reading.not_a_state:
        return Assessment(
            UNKNOWN,
            f"unknown ({reading.not_a_state})",
            never_force=f"its {reading.source or 'probe'} answered, but {reading.not_a_state}: "
            "an answer that is no state is never taken for stuck",
        )
    if reading.state is None:
        return Assessment(UNKNOWN, f"unknown ({reading.error or 'no answer'})")
    return Assessment(STUCK, reading.state_name)
