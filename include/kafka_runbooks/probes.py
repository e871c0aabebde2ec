"""Broker-state probes: is this broker running, starting, or recovering its logs?

A restart tool that only sees "not ready" cannot tell a stuck broker from one replaying
its logs after an unclean shutdown, and force-restarting the latter sends it back to the
start of its recovery. Two sources answer the question:

- the Prometheus JMX exporter on the node (``kafka_server_brokerstate`` and the
  log-recovery gauges, see ``stack/jmx-exporter/kafka.yml``);
- Strimzi's KafkaAgent, ``GET /v1/broker-state`` over mutual TLS.

Either way a probe never raises, whatever the body, status or transport: anything but
a clean answer is ``state=None`` ("unknown") with the error, and what the roller does
with each reading is the state machine in ``kafka_runbooks.restart.states``. Only the integers
Kafka's BrokerState defines are states (:func:`broker_state`): ``1e300``, NaN, -1, 2.5, a bool or
a string is "unknown" with the raw value named (``not_a_state``), never "stuck" nor "running";
the recovery counts are whole numbers a Java int holds, sent as numbers, or unknown.

Seen on Kafka 4.3.1 (KRaft): logs are loaded and recovered while BrokerState is still
1 (STARTING); state 2 (RECOVERY) is the short wait to be unfenced. The recovery gauges
exist only while logs load, so missing counts are "unknown", never "not recovering".
The exporter also serves ``process_start_time_seconds``: restart evidence that does not
depend on Kafka.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.errors import BadInput

log = logging.getLogger(__name__)

STARTING = 1
STATE_NAMES = {
    0: "NOT_RUNNING",
    1: "STARTING",
    2: "RECOVERY",
    3: "RUNNING",
    6: "PENDING_CONTROLLED_SHUTDOWN",
    7: "SHUTTING_DOWN",
    127: "UNKNOWN",
}
RECOVERY = 2
RUNNING = 3
_STATES_TEXT = ", ".join(f"{v} {n}" for v, n in sorted(STATE_NAMES.items()))

#: How long a probe waits for an answer. A JMX exporter took 4-11 s to answer while its
#: broker recovered logs on a loaded machine (FIELD_NOTES): a 5 s timeout read "unknown"
#: exactly while the answer mattered most. 20 s is about twice the slowest answer seen.
DEFAULT_TIMEOUT_S = 20.0
#: the environment's default for every probe (a connection's ``timeout_s`` extra wins)
TIMEOUT_ENV = "KAFKA_RUNBOOKS_PROBE_TIMEOUT_S"


@dataclass(frozen=True)
class BrokerStateReading:
    node_id: int
    state: int | None
    remaining_logs: int | None = None
    remaining_segments: int | None = None
    source: str = ""
    error: str | None = None
    # when the node's process started (epoch ms), if the source tells: restart evidence
    process_start_ms: int | None = None
    # the source answered (HTTP 200) but Kafka had not registered its BrokerState yet
    state_not_registered: bool = False
    # the source answered with a BrokerState value that is none of Kafka's states: why, naming it
    # (unknown, never "stuck": ``restart.states`` never forces a restart on it)
    not_a_state: str | None = None

    @property
    def known(self) -> bool:
        """Whether the source gave a BrokerState at all; False means unknown, never 'not running'."""
        return self.state is not None

    @property
    def state_name(self) -> str:
        """Kafka's name of the state (RUNNING, RECOVERY, ...), ``unknown`` when the source gave none."""
        if self.state is None:
            return "unknown"
        return STATE_NAMES.get(self.state, f"state {self.state}")

    @property
    def recovering(self) -> bool:
        """State 2, or logs still being recovered (Kafka 4.x does this in STARTING)."""
        if self.state == RECOVERY:
            return True
        return (
            self.state is not None
            and self.state != RUNNING
            and bool((self.remaining_logs or 0) > 0 or (self.remaining_segments or 0) > 0)
        )

    @property
    def counts_known(self) -> bool:
        """Whether the source reported either log-recovery count (remaining logs or segments); absent
        counts are unknown, not zero."""
        return self.remaining_logs is not None or self.remaining_segments is not None

    def recovery_text(self) -> str:
        """The counts for a decision record; their absence said as such, never as zero."""
        if not self.counts_known:
            return "recovery counts unknown (no source reports them now)"
        return (
            f"{_or_unknown(self.remaining_logs)} logs and {_or_unknown(self.remaining_segments)} "
            "segments still to recover"
        )

    @property
    def running(self) -> bool:
        """Whether the broker reported RUNNING (3); an unknown state is not running."""
        return self.state == RUNNING

    def as_dict(self) -> dict[str, Any]:
        """The reading as decision records and progress show it, unknown fields as None."""
        return {
            "node_id": self.node_id,
            "state": self.state,
            "state_name": self.state_name,
            "remaining_logs_to_recover": self.remaining_logs,
            "remaining_segments_to_recover": self.remaining_segments,
            "source": self.source,
            "error": self.error,
            "process_start_ms": self.process_start_ms,
            "state_not_registered": self.state_not_registered,
            "not_a_state": self.not_a_state,
        }


def _or_unknown(value: int | None) -> str:
    return "unknown" if value is None else str(value)


#: Kafka's recovery gauges (LogManager's remainingLogsToRecover, remainingSegmentsToRecover) are Java ints
MAX_COUNT = 2**31 - 1
#: a process start time in epoch ms: a whole number a double holds exactly (2**53)
MAX_EPOCH_MS = 2**53


def _whole(value: Any, limit: int) -> int | None:
    """A whole number from 0 to ``limit`` sent as a number, or None. A Prometheus gauge is a double
    (``3.0`` is 3), a JSON number may be ``1.0``; a string, a bool, NaN, an infinity, a negative, a
    fraction or a number past ``limit`` (``1e300``, past any value the gauge can hold) is none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0 or value > limit or value != int(value):
        return None
    return int(value)


def _count(value: Any) -> int | None:
    """A log-recovery count (Kafka's gauges are Java ints): a non-negative whole number sent as a
    number, or None (unknown, never 0)."""
    return _whole(value, MAX_COUNT)


def broker_state(value: Any) -> tuple[int | None, str | None]:
    """(state, None) when ``value`` is one of the integers Kafka's BrokerState defines
    (org.apache.kafka.metadata.BrokerState: :data:`STATE_NAMES`), else (None, why) naming the raw
    value: anything else (``1e300``, NaN, -1, 2.5, ``true``, ``"2"``, 4) is no state, and an unknown
    state is never "stuck" nor "running". None (the source sent no BrokerState) is (None, None)."""
    if value is None:
        return None, None
    state = _whole(value, max(STATE_NAMES))
    if state is None or state not in STATE_NAMES:
        return None, f"BrokerState {value!r} is not one of Kafka's states ({_STATES_TEXT})"
    return state, None


def _unknown(node_id: int, source: str, error: str) -> BrokerStateReading:
    return BrokerStateReading(node_id, None, source=source, error=error)


class PrometheusProbe:
    """Reads the JMX exporter's endpoint of each node.

    :param endpoints: node id -> metrics URL, for clusters whose exporters listen on
        different ports (the local stack), and/or
    :param url_template: e.g. ``http://kafka-{node_id}.kafka:9404/metrics``.
    """

    kind = "prometheus"

    def __init__(
        self,
        endpoints: dict[int, str] | None = None,
        url_template: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        verify: str | bool = True,
    ) -> None:
        if not endpoints and not url_template:
            raise BadInput("a Prometheus probe needs 'endpoints' or 'url_template'")
        self.endpoints = {int(k): v for k, v in (endpoints or {}).items()}
        self.url_template = url_template
        self.timeout_s = timeout_s
        self.verify = verify

    def url(self, node_id: int) -> str:
        """The metrics URL of ``node_id``: its own endpoint if configured, else the template; KeyError when
        neither names it."""
        if node_id in self.endpoints:
            return self.endpoints[node_id]
        if self.url_template:
            return self.url_template.format(node_id=node_id)
        raise KeyError(f"no metrics endpoint configured for node {node_id}")

    def read(self, node_id: int) -> BrokerStateReading:
        """Never raises: a transport error, a non-200 or a body it cannot read is "unknown"."""
        import requests

        try:
            resp = requests.get(self.url(node_id), timeout=self.timeout_s, verify=self.verify)
            if resp.status_code != 200:
                return _unknown(node_id, self.kind, f"HTTP {resp.status_code}")
            return parse_exposition(node_id, resp.text)
        except Exception as exc:  # the contract: a probe answers, it does not raise
            return _unknown(node_id, self.kind, f"{type(exc).__name__}: {exc}"[:300])


#: gauges with one sample per log dir (and recovery thread): their total is the sum
_SUMMED = ("kafka_log_remaining_logs_to_recover", "kafka_log_remaining_segments_to_recover")
#: gauges a node has once: several different samples are a conflict, never a sum
_SINGLE = ("kafka_server_brokerstate", "process_start_time_seconds")


def parse_exposition(node_id: int, text: str) -> BrokerStateReading:
    """BrokerState, recovery totals (summed over log dirs and recovery threads) and the
    process start time. Never raises: a body it cannot read is "unknown".

    Any legal exposition is read (comments, timestamps, labels in any order, escaped label
    values, +Inf/-Inf/NaN). Two different BrokerState samples are "unknown: conflicting
    samples": summed, STARTING (1) and RECOVERY (2) would read as RUNNING (3).
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in _SUMMED or sample.name in _SINGLE:
                    samples.setdefault(sample.name, []).append(sample.value)
    except Exception as exc:
        return _unknown(node_id, "prometheus", f"unparseable exposition: {type(exc).__name__}: {exc}"[:300])
    raw_state, state_error = _single(samples.get("kafka_server_brokerstate"))
    started, _ = _single(samples.get("process_start_time_seconds"))
    state, not_a_state = broker_state(raw_state)
    return BrokerStateReading(
        node_id,
        state,
        _summed(samples.get("kafka_log_remaining_logs_to_recover")),
        _summed(samples.get("kafka_log_remaining_segments_to_recover")),
        source="prometheus",
        error=None
        if state is not None
        else not_a_state or state_error or "no kafka_server_brokerstate in the exposition",
        process_start_ms=_whole(None if started is None else started * 1000, MAX_EPOCH_MS),
        not_a_state=not_a_state,
        # the exporter runs inside the broker's JVM: it answering without BrokerState
        # means Kafka has not registered it yet, i.e. the broker is early in its start
        state_not_registered="kafka_server_brokerstate" not in samples,
    )


def _single(values: list[float] | None) -> tuple[float | None, str | None]:
    """The value of a gauge a node has once, or (None, why): different samples conflict."""
    if not values:
        return None, None
    distinct = sorted({repr(float(v)) for v in values})
    if len(distinct) > 1:
        return None, f"conflicting samples: {', '.join(distinct)}"
    return float(values[0]), None


def _summed(values: list[float] | None) -> int | None:
    """The total of per-dir/per-thread counts; unknown if any sample is not a count."""
    if not values:
        return None
    counts = [_count(v) for v in values]
    return None if None in counts else sum(counts)


class StrimziAgentProbe:
    """Strimzi's KafkaAgent: ``GET https://<node>:8443/v1/broker-state`` with mutual TLS.

    404 (unknown API version, or the metric is not registered yet), 503, any other
    non-200, a refused connection or a timeout all mean "unknown".
    """

    kind = "strimzi-agent"

    def __init__(
        self,
        url_template: str,
        cert_file: str,
        key_file: str,
        ca_file: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        endpoints: dict[int, str] | None = None,
    ) -> None:
        self.url_template = url_template
        self.endpoints = {int(k): v for k, v in (endpoints or {}).items()}
        self.cert = (cert_file, key_file)
        self.ca_file = ca_file
        self.timeout_s = timeout_s

    def url(self, node_id: int) -> str:
        """The agent's broker-state URL of ``node_id``: its own endpoint if configured, else the template."""
        return self.endpoints.get(node_id) or self.url_template.format(node_id=node_id)

    def read(self, node_id: int) -> BrokerStateReading:
        """Never raises: a transport error, a non-200 or a body it cannot read is "unknown"."""
        import requests

        try:
            resp = requests.get(
                self.url(node_id), cert=self.cert, verify=self.ca_file, timeout=self.timeout_s
            )
            if resp.status_code != 200:
                return _unknown(node_id, self.kind, f"HTTP {resp.status_code}")
            return parse_agent_body(node_id, resp.content)
        except Exception as exc:  # the contract: a probe answers, it does not raise
            return _unknown(node_id, self.kind, f"{type(exc).__name__}: {exc}"[:300])


def parse_agent_body(node_id: int, raw: bytes | str) -> BrokerStateReading:
    """KafkaAgent's ``{"brokerState": 2, "recovery": {...}}``; never raises.

    The state is read on its own: a recovery part that is missing or not an object
    (``"recoveryState": "unavailable"``) leaves the counts unknown, not the state.
    The agent sends counts only in state 2 (strimzi-048).
    """
    import json

    source = StrimziAgentProbe.kind
    try:
        body = json.loads(raw)
    except Exception as exc:
        return _unknown(node_id, source, f"unexpected body: {type(exc).__name__}: {exc}"[:300])
    if not isinstance(body, dict):
        return _unknown(node_id, source, f"unexpected body: a JSON {type(body).__name__}, not an object")
    state, not_a_state = broker_state(body.get("brokerState"))
    if state is None:
        why = not_a_state or "no brokerState in the body"
        return BrokerStateReading(
            node_id, None, source=source, error=f"unexpected body: {why}"[:300], not_a_state=not_a_state
        )
    recovery = body.get("recoveryState", body.get("recovery"))
    if not isinstance(recovery, dict):
        recovery = {}
    return BrokerStateReading(
        node_id,
        state,
        _count(recovery.get("remainingLogsToRecover")),
        _count(recovery.get("remainingSegmentsToRecover")),
        source=source,
    )


class CombinedProbe:
    """Several sources for one node: the state from the first that knows it, the recovery
    counts and the process start time from whichever source reports them.

    Strimzi's agent sends counts only in state 2 and the exporter's gauges exist only
    while logs load: asking both is how a STARTING broker's counts are not missed.
    """

    kind = "combined"

    def __init__(self, probes: list) -> None:
        if not probes:
            raise BadInput("a combined probe needs at least one probe")
        self.probes = list(probes)

    def read(self, node_id: int) -> BrokerStateReading:
        """One reading from every probe: the state from the first that knows it, counts and process start
        from whichever reports them; unknown when none knows."""
        readings = []
        for probe in self.probes:
            try:
                readings.append(probe.read(node_id))
            except Exception as exc:  # a probe never raises; a foreign one might
                readings.append(
                    _unknown(node_id, getattr(probe, "kind", "?"), f"{type(exc).__name__}: {exc}")
                )
        state_from = next((r for r in readings if r.known), None)
        counts_from = next((r for r in readings if r.counts_known), None)
        started = next((r.process_start_ms for r in readings if r.process_start_ms is not None), None)
        sources = "+".join(r.source for r in readings)
        if state_from is None:
            return BrokerStateReading(
                node_id,
                None,
                source=sources,
                error="; ".join(f"{r.source}: {r.error}" for r in readings),
                process_start_ms=started,
                state_not_registered=any(r.state_not_registered for r in readings),
                not_a_state=next((r.not_a_state for r in readings if r.not_a_state), None),
            )
        return BrokerStateReading(
            node_id,
            state_from.state,
            counts_from.remaining_logs if counts_from else None,
            counts_from.remaining_segments if counts_from else None,
            source=f"state: {state_from.source}" + (f", counts: {counts_from.source}" if counts_from else ""),
            process_start_ms=started,
        )


def timeout_setting(extra: dict[str, Any]) -> float:
    """A probe's timeout: the connection's ``timeout_s`` extra, else ``$KAFKA_RUNBOOKS_PROBE_TIMEOUT_S``,
    else :data:`DEFAULT_TIMEOUT_S`; anything but a positive number is refused before any call."""
    raw = extra.get("timeout_s")
    where = "the connection's timeout_s"
    if raw is None:
        raw, where = os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S, TIMEOUT_ENV
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise BadInput(f"{where} must be a positive number of seconds, got {raw!r}")
    return value


def probe_from_config(extra: dict[str, Any]):
    """Build a probe from a connection's extras: ``{"kind": "prometheus" | "strimzi-agent" |
    "combined", ...}``; ``combined`` takes ``{"probes": [<extras>, ...]}``."""
    kind = extra.get("kind", "prometheus")
    timeout = timeout_setting(extra)
    if kind == "combined":
        return CombinedProbe([probe_from_config(p) for p in extra.get("probes") or []])
    if kind == "prometheus":
        return PrometheusProbe(
            endpoints=extra.get("endpoints"),
            url_template=extra.get("url_template"),
            timeout_s=timeout,
            verify=extra.get("ca_file", True),
        )
    if kind == "strimzi-agent":
        missing = [k for k in ("url_template", "cert_file", "key_file", "ca_file") if not extra.get(k)]
        if missing:
            raise BadInput(f"a strimzi-agent probe needs {', '.join(missing)} in the connection extras")
        return StrimziAgentProbe(
            extra["url_template"],
            extra["cert_file"],
            extra["key_file"],
            extra["ca_file"],
            timeout_s=timeout,
            endpoints=extra.get("endpoints"),
        )
    raise BadInput(f"unknown broker-state probe kind {kind!r} (prometheus, strimzi-agent or combined)")
