"""Broker-state probes: is this broker running, starting, or recovering its logs?

A restart tool that only sees "not ready" cannot tell a stuck broker from one replaying
its logs after an unclean shutdown, and force-restarting the latter sends it back to the
start of its recovery. Two sources answer the question:

- the Prometheus JMX exporter on the node (``kafka_server_brokerstate`` and the
  log-recovery gauges, see ``stack/jmx-exporter/kafka.yml``);
- Strimzi's KafkaAgent, ``GET /v1/broker-state`` over mutual TLS.

Either way a probe never raises, whatever the body, status or transport: anything but
a clean answer is ``state=None`` ("unknown") with the error, and what the roller does
with each reading is the state machine in ``kafka_runbooks.restart.states``.

Seen on Kafka 4.3.1 (KRaft): logs are loaded and recovered while BrokerState is still
1 (STARTING); state 2 (RECOVERY) is the short wait to be unfenced. The recovery gauges
exist only while logs load, so missing counts are "unknown", never "not recovering".
The exporter also serves ``process_start_time_seconds``: restart evidence that does not
depend on Kafka.
"""

from __future__ import annotations

import logging
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
        }


def _or_unknown(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _count(value: Any) -> int | None:
    """A non-negative whole number, or None: a bool, NaN, +Inf or -1 is not a count.

    A number sent as a JSON string (``"2"``) is the number: it is legal JSON for a number,
    and reading it as unknown would make a broker in RECOVERY look stuck (force-restartable).
    """
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")) or value < 0 or value != int(value):
        return None
    return int(value)


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
    state = _count(raw_state)
    if state is None and raw_state is not None:
        state_error = f"BrokerState {raw_state!r} is not a state"
    return BrokerStateReading(
        node_id,
        state,
        _summed(samples.get("kafka_log_remaining_logs_to_recover")),
        _summed(samples.get("kafka_log_remaining_segments_to_recover")),
        source="prometheus",
        error=None if state is not None else state_error or "no kafka_server_brokerstate in the exposition",
        process_start_ms=_count(None if started is None else started * 1000),
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
    state = _count(body.get("brokerState"))
    if state is None:
        return _unknown(node_id, source, f"unexpected body: brokerState {body.get('brokerState')!r}"[:300])
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
