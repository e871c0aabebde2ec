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

    @property
    def looks_like_broker(self) -> bool:
        return self.broker_state is not None or any(c in self.counters for c in BROKER_COUNTERS)

    @property
    def looks_like_controller(self) -> bool:
        return self.active_controller_count is not None or any(
            c in self.counters for c in CONTROLLER_COUNTERS
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "counters": dict(self.counters),
            "names": dict(self.names),
            "broker_state": self.broker_state,
            "active_controller_count": self.active_controller_count,
            "raft_leader": self.raft_leader,
            "process_start_s": self.process_start_s,
        }


def normalise(name: str, labels: dict[str, str]) -> str:
    """One spelling per metric: lower case, no ``_total``, the default format's name label folded in."""
    out = name.lower()
    if out.endswith("_total"):
        out = out[: -len("_total")]
    if out.endswith("_value") and labels.get("name"):
        out = f"{out[: -len('_value')]}_{labels['name']}".lower()
    return out.replace("-", "_")


def parse(text: str) -> NodeMetrics:
    """Read the counters and gauges this sweep needs; ``ValueError`` if the text is not an exposition.

    Several samples of one metric (labels) are summed; NaN samples are ignored.
    """
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = normalise(sample.name, sample.labels)
            if key in _WANTED and not math.isnan(sample.value):
                found[key] = found.get(key, 0.0) + sample.value

    counters: dict[str, float] = {}
    names: dict[str, str] = {}
    for logical, candidates in COUNTERS.items():
        for candidate in candidates:
            if candidate in found:
                counters[logical] = found[candidate]
                names[logical] = candidate
                break

    def first(candidates: tuple[str, ...]) -> float | None:
        return next((found[c] for c in candidates if c in found), None)

    def as_int(value: float | None) -> int | None:
        return None if value is None else int(value)

    return NodeMetrics(
        counters=counters,
        names=names,
        broker_state=as_int(first(BROKER_STATE)),
        active_controller_count=as_int(first(ACTIVE_CONTROLLER)),
        raft_leader=as_int(first(RAFT_LEADER)),
        process_start_s=first(PROCESS_START),
    )
