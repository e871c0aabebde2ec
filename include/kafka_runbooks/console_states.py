"""What a broker that does not serve is doing, for the Kafka page's live read: its own BrokerState
and log-recovery counts, from the broker-state probe the restart runbook reads
(:mod:`kafka_runbooks.probes`, a cluster's ``<id>_probe`` connection).

Issue #39 point 5: a broker in log recovery showed only "fenced"; the segments left appeared
only in a restart decision's raw facts. Only brokers that do not serve now are asked (a serving
one is RUNNING by what the cluster says), side by side and within :data:`PROBE_DEADLINE_S`, so a
frozen broker's metrics endpoint never holds the page. Whether a reading is log recovery is the
reading's own rule (``BrokerStateReading.recovering``); a state or count not read is said as not
read, never as "not recovering".
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.probes import STARTING, BrokerStateReading

PROBE_DEADLINE_S = 2.0  # of the page's LIVE_DEADLINE_S, what the probe reads may take, all together
ERROR_SHOWN = 160  # characters of a probe's error on the page (the whole reading is in the JSON)


@dataclass(frozen=True)
class BrokerStates:
    """The probe of one cluster, or why there is none (no ``<id>_probe`` connection, bad extras)."""

    probe: Any = None  # anything with ``read(node_id) -> BrokerStateReading`` (kafka_runbooks.probes)
    why_not: str | None = None


def with_broker_states(
    shown: list[dict[str, Any]], states: BrokerStates, deadline_s: float = PROBE_DEADLINE_S
) -> int | None:
    """Add to each broker row not serving (its ``state`` not "up…") what its probe says, in its
    ``state`` words and as ``broker_state`` (the reading, or None); the number in log recovery, or
    None when brokers not serving could not be asked at all (unknown, never 0)."""
    asked = [b for b in shown if not str(b["state"]).startswith("up")]
    if states.probe is None:
        for b in asked:
            b["broker_state"] = None
            b["state"] += f"; BrokerState not read ({states.why_not or 'no broker-state probe'})"
        return None if asked else 0
    readings = _read_side_by_side(states.probe, [b["broker_id"] for b in asked], deadline_s)
    recovering = 0
    for b in asked:
        reading = readings.get(b["broker_id"])
        b["broker_state"] = None if reading is None else reading.as_dict()
        b["state"] += "; " + state_words(reading, deadline_s)
        recovering += bool(reading is not None and reading.recovering)
    return recovering


def state_words(reading: BrokerStateReading | None, deadline_s: float = PROBE_DEADLINE_S) -> str:
    """A reading as the broker row says it: log recovery with what is left, else the state read."""
    if reading is None:
        return f"BrokerState not read within {deadline_s:g} s (its metrics endpoint did not answer)"
    if reading.recovering:
        return f"in log recovery: {reading.recovery_text()} (BrokerState {reading.state_name})"
    if reading.state == STARTING:  # Kafka 4.x loads and recovers logs in STARTING, gauges not always sampled
        return f"BrokerState STARTING: log recovery possible, {reading.recovery_text()}"
    if reading.known:
        return f"BrokerState {reading.state_name}"
    return f"BrokerState unknown ({(reading.error or 'no source reports it')[:ERROR_SHOWN]})"


def _read_side_by_side(probe: Any, broker_ids: list[int], deadline_s: float) -> dict[int, BrokerStateReading]:
    """One daemon thread per broker (a hung endpoint never holds the process's exit); what has not
    answered by the deadline is left out (the caller says it was not read in time)."""
    got: dict[int, BrokerStateReading] = {}
    lock = threading.Lock()

    def read(node_id: int) -> None:
        """One broker's reading into ``got``; a probe that raises gives an unknown reading."""
        try:
            reading = probe.read(node_id)
        except Exception as exc:  # noqa: BLE001 - a probe never raises; a foreign one might
            reading = BrokerStateReading(node_id, None, source="probe", error=f"{type(exc).__name__}: {exc}")
        with lock:
            got[node_id] = reading

    threads = [
        threading.Thread(target=read, args=(n,), daemon=True, name=f"kafka-console-probe-{n}")
        for n in broker_ids
    ]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    with lock:
        return dict(got)
