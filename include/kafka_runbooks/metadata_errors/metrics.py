"""Which Prometheus names carry the KIP-859 counters, and reading them from an exposition.

KIP-859 as shipped (Kafka 3.3.0) and as the JMX exporter rules in
``stack/jmx-exporter/kafka.yml`` name them (seen on Kafka 4.3.1):

- broker ``kafka.server:type=broker-metadata-metrics`` attributes
  ``metadata-load-error-count`` and ``metadata-apply-error-count`` ->
  ``kafka_server_broker_metadata_metrics_metadata_load_error_count`` / ``..._apply_error_count``;
- controller ``kafka.controller:type=KafkaController,name=MetadataErrorCount`` ->
  ``kafka_controller_kafkacontroller_metadataerrorcount``.

The KIP's text proposed other names (``publisher-error-count``,
``listener-batch-load-error-count``, ``ForceRenounceCount``); exporters configured from
the KIP may carry them, so they are accepted as the same counters. The exporter's
default naming (no rules: ``kafka_controller_KafkaController_Value{name="MetadataErrorCount"}``)
and counter-typed families (``..._total``) are normalised to the same names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks.errors import CallFailed
from kafka_runbooks.probes import broker_state

# logical counter -> accepted metric names, the shipped name first
COUNTERS: dict[str, tuple[str, ...]] = {
    "metadata_load_errors": (
        "kafka_server_broker_metadata_metrics_metadata_load_error_count",
        "kafka_server_broker_metadata_metrics_listener_batch_load_error_count",
    ),
    "metadata_apply_errors": (
        "kafka_server_broker_metadata_metrics_metadata_apply_error_count",
        "kafka_server_broker_metadata_metrics_publisher_error_count",
    ),
    "controller_metadata_errors": (
        "kafka_controller_kafkacontroller_metadataerrorcount",
        "kafka_controller_kafkacontroller_forcerenouncecount",
    ),
}
BROKER_COUNTERS = ("metadata_load_errors", "metadata_apply_errors")
CONTROLLER_COUNTERS = ("controller_metadata_errors",)

BROKER_STATE = ("kafka_server_brokerstate", "kafka_server_kafkaserver_brokerstate")
ACTIVE_CONTROLLER = ("kafka_controller_kafkacontroller_activecontrollercount",)
RAFT_LEADER = ("kafka_server_raft_metrics_current_leader",)
PROCESS_START = ("process_start_time_seconds",)

_WANTED = {n for names in COUNTERS.values() for n in names} | {
    *BROKER_STATE,
    *ACTIVE_CONTROLLER,
    *RAFT_LEADER,
    *PROCESS_START,
}


@dataclass(frozen=True)
class NodeMetrics:
    """What one node's exposition says; ``None`` where the metric is absent."""

    counters: dict[str, float] = field(default_factory=dict)  # logical name -> value
    names: dict[str, str] = field(default_factory=dict)  # logical name -> metric name found
    broker_state: int | None = None
    active_controller_count: int | None = None
    raft_leader: int | None = None
    process_start_s: float | None = None
    # metric (logical name) -> why it is unknown though present: conflicting samples, +Inf, NaN
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def looks_like_broker(self) -> bool:
        """Whether the node exposes a broker's metrics (BrokerState or a broker's error counter)."""
        return self.broker_state is not None or any(c in self.counters for c in BROKER_COUNTERS)

    @property
    def looks_like_controller(self) -> bool:
        """Whether the node exposes a controller's metrics (ActiveControllerCount or a controller's error
        counter)."""
        return self.active_controller_count is not None or any(
            c in self.counters for c in CONTROLLER_COUNTERS
        )

    def as_dict(self) -> dict[str, Any]:
        """The scrape as the sweep's state and report keep it (a counter it could not read stays listed as
        unreadable)."""
        return {
            "counters": dict(self.counters),
            "names": dict(self.names),
            "broker_state": self.broker_state,
            "active_controller_count": self.active_controller_count,
            "raft_leader": self.raft_leader,
            "process_start_s": self.process_start_s,
            "unreadable": dict(self.unreadable),
        }


def normalise(name: str, labels: dict[str, str]) -> str:
    """One spelling per metric: lower case, no ``_total``, the default format's name label folded in."""
    out = name.lower()
    if out.endswith("_total"):
        out = out[: -len("_total")]
    if out.endswith("_value") and labels.get("name"):
        out = f"{out[: -len('_value')]}_{labels['name']}".lower()
    return out.replace("-", "_")


class NotAnExposition(CallFailed, ValueError):
    """The endpoint answered, but not with Prometheus text (a ``ValueError`` to the readers
    that treat any unreadable answer as that node's unknown)."""


def parse(text: str) -> NodeMetrics:
    """Read the counters and gauges this sweep needs; ``NotAnExposition`` if the text is not one.

    Any legal exposition is read (comments, timestamps, labels in any order, escaped label
    values, +Inf/-Inf/NaN). A counter's samples (one per label set) are summed; a gauge a
    node has once (BrokerState, ActiveControllerCount, the raft leader, the process start
    time) with different samples is unknown ("conflicting samples"), never their sum. A
    value that is not a finite number leaves its metric unknown, the reason in ``unreadable``.
    """
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = normalise(sample.name, sample.labels)
                if key in _WANTED:
                    found.setdefault(key, []).append(float(sample.value))
    except Exception as exc:  # whatever the parser raises on text it cannot read: "not an exposition"
        raise NotAnExposition(f"{type(exc).__name__}: {exc}") from exc
    unreadable: dict[str, str] = {}
    counters, names = _counters(found, unreadable)
    return NodeMetrics(
        counters=counters,
        names=names,
        broker_state=_broker_state(_gauge(found, BROKER_STATE, "broker_state", unreadable), unreadable),
        active_controller_count=_whole(
            _gauge(found, ACTIVE_CONTROLLER, "active_controller_count", unreadable),
            "active_controller_count",
            unreadable,
        ),
        raft_leader=_whole(_gauge(found, RAFT_LEADER, "raft_leader", unreadable), "raft_leader", unreadable),
        process_start_s=_gauge(found, PROCESS_START, "process_start_s", unreadable),
        unreadable=unreadable,
    )


def _counters(
    found: dict[str, list[float]], unreadable: dict[str, str]
) -> tuple[dict[str, float], dict[str, str]]:
    """Each logical counter from its first accepted name: the sum of its samples, or unknown
    (in ``unreadable``) when a sample is not a finite number (an error count of +Inf or NaN
    says nothing about errors)."""
    counters: dict[str, float] = {}
    names: dict[str, str] = {}
    for logical, candidates in COUNTERS.items():
        name = next((c for c in candidates if c in found), None)
        if name is None:
            continue
        names[logical] = name
        bad = [v for v in found[name] if not math.isfinite(v)]
        if bad:
            unreadable[logical] = f"{name} has a sample of {bad[0]!r}"
        else:
            counters[logical] = sum(found[name])
    return counters, names


def _gauge(
    found: dict[str, list[float]], candidates: tuple[str, ...], logical: str, unreadable: dict[str, str]
) -> float | None:
    """The one value of a gauge a node has once; None (with the reason) if its samples differ
    or it is not a finite number."""
    name = next((c for c in candidates if c in found), None)
    if name is None:
        return None
    distinct = sorted({repr(v) for v in found[name]})
    if len(distinct) > 1:
        unreadable[logical] = f"{name}: conflicting samples: {', '.join(distinct)}"
        return None
    value = found[name][0]
    if not math.isfinite(value):
        unreadable[logical] = f"{name} is {value!r}"
        return None
    return value


def _broker_state(value: float | None, unreadable: dict[str, str]) -> int | None:
    """BrokerState by the probes' rule (:func:`kafka_runbooks.probes.broker_state`): only a value
    Kafka's BrokerState defines is a state; ``1e300`` or 4 is unknown with the value named, never a
    broker "not running"."""
    state, why = broker_state(value)
    if why is not None:
        unreadable["broker_state"] = why
    return state


def _whole(value: float | None, logical: str, unreadable: dict[str, str]) -> int | None:
    """A gauge that counts or names something is a whole number; 2.5 is unknown, not 2."""
    if value is None:
        return None
    if value != int(value):
        unreadable[logical] = f"{logical} {value!r} is not a whole number"
        return None
    return int(value)
