"""Where each node's metrics are, and reading them.

Configured like the restart runbook's broker-state probe (the same Airflow connection,
``kafka_broker_probe_default`` by default, its extras):

- ``endpoints``: node id -> URL, for nodes whose exporters listen on their own ports
  (the local stack) or to point one node elsewhere;
- ``url_template``: e.g. ``http://{host}:9404/metrics`` or
  ``http://kafka-{node_id}.kafka:9404/metrics``; ``{host}`` is the node's host as the
  cluster reports it (brokers: DescribeCluster; controllers: DescribeQuorum, Kafka >= 3.8);
- ``controller_url_template``: the same for controllers when they differ;
- ``timeout_s`` (default ``$KAFKA_RUNBOOKS_PROBE_TIMEOUT_S``, else 20: exporters answer slowly
  while their broker recovers logs), ``ca_file`` (TLS).

An explicit endpoint wins over a template. A node with no URL, a refused connection, a
timeout, a non-200 answer or an unparseable body is a reading with an error: "unknown".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.metadata_errors.metrics import NodeMetrics, parse
from kafka_runbooks.probes import DEFAULT_TIMEOUT_S, timeout_setting

MAX_PARALLEL = 8


@dataclass(frozen=True)
class NodeReading:
    node_id: int
    url: str | None
    metrics: NodeMetrics | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the node's metrics were read and parsed; otherwise ``error`` says why and the node is
        unknown."""
        return self.metrics is not None


class MetricsEndpoints:
    def __init__(
        self,
        endpoints: dict[Any, str] | None = None,
        url_template: str | None = None,
        controller_url_template: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        verify: str | bool = True,
    ) -> None:
        self.endpoints = {int(k): str(v) for k, v in (endpoints or {}).items()}
        self.url_template = url_template or None
        self.controller_url_template = controller_url_template or None
        if not (self.endpoints or self.url_template or self.controller_url_template):
            raise BadInput(
                "no metrics endpoints configured: give 'endpoints' (node id -> URL) and/or "
                "'url_template' (with {node_id} or {host}) in the connection's extras"
            )
        for template in (self.url_template, self.controller_url_template):
            if template:
                _check_template(template)
        if timeout_s <= 0:
            raise BadInput(f"timeout_s must be positive, got {timeout_s}")
        self.timeout_s = timeout_s
        self.verify = verify

    @classmethod
    def from_config(cls, extra: dict[str, Any]) -> MetricsEndpoints:
        """The endpoints from a metrics connection's extras; BadInput for a probe kind other than
        prometheus."""
        kind = extra.get("kind", "prometheus")
        if kind != "prometheus":
            raise BadInput(
                f"the metadata-error sweep reads Prometheus endpoints; this connection is a {kind!r} "
                "probe: give a connection with kind 'prometheus' (param metrics_conn_id)"
            )
        return cls(
            endpoints=extra.get("endpoints"),
            url_template=extra.get("url_template"),
            controller_url_template=extra.get("controller_url_template"),
            timeout_s=timeout_setting(extra),
            verify=extra.get("ca_file", True),
        )

    @property
    def configured_ids(self) -> list[int]:
        """Node ids with an endpoint of their own, sorted."""
        return sorted(self.endpoints)

    def url(self, node_id: int, controller: bool = False, host: str | None = None) -> str:
        """The metrics URL of a node: its own endpoint, else the (controller) template with the host the
        cluster reported; KeyError when none can be made."""
        if node_id in self.endpoints:
            return self.endpoints[node_id]
        template = (self.controller_url_template if controller else None) or self.url_template
        if not template:
            raise KeyError(f"no metrics endpoint configured for node {node_id}")
        if "{host}" in template and not host:
            raise KeyError(f"node {node_id}: the URL template needs {{host}} and the cluster reported none")
        return template.format(node_id=node_id, host=host or "")

    def read(self, node_id: int, controller: bool = False, host: str | None = None) -> NodeReading:
        """Scrape one node; any failure (no URL, no answer, non-200, unparseable) is that node's unknown
        reading, never an exception."""
        import requests

        try:
            url = self.url(node_id, controller, host)
        except KeyError as exc:
            return NodeReading(node_id, None, None, str(exc.args[0]))
        try:
            resp = requests.get(url, timeout=self.timeout_s, verify=self.verify)
        except requests.RequestException as exc:
            return NodeReading(node_id, url, None, f"{type(exc).__name__}: {exc}")
        if resp.status_code != 200:
            return NodeReading(node_id, url, None, f"HTTP {resp.status_code}")
        try:
            return NodeReading(node_id, url, parse(resp.text))
        except Exception as exc:  # one node's odd answer is that node's unknown, never the sweep's end
            return NodeReading(node_id, url, None, f"unparseable exposition: {exc}"[:300])

    def read_all(self, nodes: list[tuple[int, bool, str | None]]) -> dict[int, NodeReading]:
        """Read ``(node_id, is_controller, host)`` nodes in parallel: one slow node does not add up."""
        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(nodes))) as pool:
            readings = pool.map(lambda n: self.read(*n), nodes)
            return {r.node_id: r for r in readings}


def _check_template(template: str) -> None:
    try:
        template.format(node_id=1, host="h")
    except (KeyError, IndexError, ValueError) as exc:
        raise BadInput(
            f"bad URL template {template!r}: only {{node_id}} and {{host}} can be used ({exc})"
        ) from exc
