"""Broker-state probes: is this broker running, starting, or recovering its logs?

A restart tool that only sees "not ready" cannot tell a stuck broker from one replaying
its logs after an unclean shutdown, and force-restarting the latter sends it back to the
start of its recovery. Two sources answer the question:

- the Prometheus JMX exporter on the node (``kafka_server_brokerstate`` and the
  log-recovery gauges, see ``stack/jmx-exporter/kafka.yml``);
- Strimzi's KafkaAgent, ``GET /v1/broker-state`` over mutual TLS.

Either way a probe never raises: anything but a clean answer is ``state=None``
("unknown"), and the caller continues as a restart tool without a probe would.

Seen on Kafka 4.3.1 (KRaft): logs are loaded and recovered while BrokerState is still
1 (STARTING); state 2 (RECOVERY) is the short wait to be unfenced. So a broker counts
as *recovering* when its state is 2 or its log-recovery gauges are present and non-zero.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class BrokerStateReading:
    node_id: int
    state: int | None
    remaining_logs: int | None = None
    remaining_segments: int | None = None
    source: str = ""
    error: str | None = None

    @property
    def known(self) -> bool:
        return self.state is not None

    @property
    def state_name(self) -> str:
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
    def running(self) -> bool:
        return self.state == RUNNING

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "state": self.state,
            "state_name": self.state_name,
            "remaining_logs_to_recover": self.remaining_logs,
            "remaining_segments_to_recover": self.remaining_segments,
            "source": self.source,
            "error": self.error,
        }


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
        timeout_s: float = 5.0,
        verify: str | bool = True,
    ) -> None:
        if not endpoints and not url_template:
            raise ValueError("a Prometheus probe needs 'endpoints' or 'url_template'")
        self.endpoints = {int(k): v for k, v in (endpoints or {}).items()}
        self.url_template = url_template
        self.timeout_s = timeout_s
        self.verify = verify

    def url(self, node_id: int) -> str:
        if node_id in self.endpoints:
            return self.endpoints[node_id]
        if self.url_template:
            return self.url_template.format(node_id=node_id)
        raise KeyError(f"no metrics endpoint configured for node {node_id}")

    def read(self, node_id: int) -> BrokerStateReading:
        import requests

        try:
            url = self.url(node_id)
            resp = requests.get(url, timeout=self.timeout_s, verify=self.verify)
        except (requests.RequestException, KeyError) as exc:
            return BrokerStateReading(node_id, None, source=self.kind, error=f"{type(exc).__name__}: {exc}")
        if resp.status_code != 200:
            return BrokerStateReading(node_id, None, source=self.kind, error=f"HTTP {resp.status_code}")
        return parse_exposition(node_id, resp.text)


def parse_exposition(node_id: int, text: str) -> BrokerStateReading:
    """BrokerState and recovery totals (summed over log dirs and recovery threads)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in (
                    "kafka_server_brokerstate",
                    "kafka_log_remaining_logs_to_recover",
                    "kafka_log_remaining_segments_to_recover",
                ):
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    except ValueError as exc:
        return BrokerStateReading(node_id, None, source="prometheus", error=f"unparseable exposition: {exc}")
    state = totals.get("kafka_server_brokerstate")
    logs = totals.get("kafka_log_remaining_logs_to_recover")
    segments = totals.get("kafka_log_remaining_segments_to_recover")
    return BrokerStateReading(
        node_id,
        None if state is None else int(state),
        None if logs is None else int(logs),
        None if segments is None else int(segments),
        source="prometheus",
        error=None if state is not None else "no kafka_server_brokerstate in the exposition",
    )


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
        timeout_s: float = 5.0,
        endpoints: dict[int, str] | None = None,
    ) -> None:
        self.url_template = url_template
        self.endpoints = {int(k): v for k, v in (endpoints or {}).items()}
        self.cert = (cert_file, key_file)
        self.ca_file = ca_file
        self.timeout_s = timeout_s

    def url(self, node_id: int) -> str:
        return self.endpoints.get(node_id) or self.url_template.format(node_id=node_id)

    def read(self, node_id: int) -> BrokerStateReading:
        import requests

        try:
            resp = requests.get(
                self.url(node_id), cert=self.cert, verify=self.ca_file, timeout=self.timeout_s
            )
        except requests.RequestException as exc:
            return BrokerStateReading(node_id, None, source=self.kind, error=f"{type(exc).__name__}: {exc}")
        if resp.status_code != 200:
            return BrokerStateReading(node_id, None, source=self.kind, error=f"HTTP {resp.status_code}")
        try:
            body = resp.json()
            state = int(body["brokerState"])
        except (ValueError, KeyError, TypeError) as exc:
            return BrokerStateReading(node_id, None, source=self.kind, error=f"unexpected body: {exc}")
        recovery = body.get("recoveryState") or body.get("recovery") or {}
        logs = recovery.get("remainingLogsToRecover")
        segments = recovery.get("remainingSegmentsToRecover")
        return BrokerStateReading(
            node_id,
            state,
            None if logs is None else int(logs),
            None if segments is None else int(segments),
            source=self.kind,
        )


def probe_from_config(extra: dict[str, Any]):
    """Build a probe from a connection's extras: ``{"kind": "prometheus" | "strimzi-agent", ...}``."""
    kind = extra.get("kind", "prometheus")
    timeout = float(extra.get("timeout_s", 5.0))
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
            raise ValueError(f"a strimzi-agent probe needs {', '.join(missing)} in the connection extras")
        return StrimziAgentProbe(
            extra["url_template"],
            extra["cert_file"],
            extra["key_file"],
            extra["ca_file"],
            timeout_s=timeout,
            endpoints=extra.get("endpoints"),
        )
    raise ValueError(f"unknown broker-state probe kind {kind!r} (prometheus or strimzi-agent)")
