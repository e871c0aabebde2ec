"""A real Prometheus (Debian's ``prometheus``) on loopback that scrapes a local stack's JMX
exporters, evaluates the project's alert rules (``stack/prometheus/kafka-alerts.yml``) and sends
what fires to an Alertmanager, as a deployment's would (docs/notifications.md).

Each target carries the labels the rules and the alert intake read: ``kafka_config_id`` (the
Airflow Kafka connection of the stack), ``kafka_role`` and ``broker_id`` or ``node_id``, and on
Connect ``connect_conn_id``. The scrape interval is the exporter's worst answer time here (a
scrape takes 4-6 s at load on 2 cores), so a slow answer is not read as a node down.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from kafka_runbooks_dev.localstack.topology import BROKER, CONNECT, Node, Topology
from kafka_runbooks_dev.loopback_daemon import LoopbackDaemon
from kafka_runbooks_dev.receivers import free_port

BINARY = "prometheus"
RULES = Path(__file__).resolve().parents[2] / "stack" / "prometheus" / "kafka-alerts.yml"
SCRAPE_INTERVAL = "6s"


def available() -> bool:
    """Whether the Prometheus binary is installed here (scripts/bootstrap.sh installs it)."""
    return shutil.which(BINARY) is not None


def scrape_targets(
    topology: Topology,
    kafka_config_id: str = "kafka_default",
    address: Callable[[Node], str] = lambda node: f"127.0.0.1:{node.metrics_port}",
) -> list[dict[str, Any]]:
    """One static target per node of ``topology``, labelled as the rules expect; ``address`` is
    where its exporter answers (loopback here; docker-compose's prometheus.yml names hosts)."""
    targets = []
    for node in topology.nodes:
        labels = {"kafka_config_id": kafka_config_id, "kafka_role": node.role}
        if node.role == BROKER:
            labels["broker_id"] = str(node.node_id)
        elif node.role == CONNECT:
            labels["connect_conn_id"] = "kafka_connect_default"
        else:
            labels["node_id"] = str(node.node_id)
        targets.append({"targets": [address(node)], "labels": labels})
    return targets


class Prometheus(LoopbackDaemon):
    """One Prometheus process scraping ``topology``'s exporters and alerting ``alertmanager_url``."""

    name = "prometheus"

    def __init__(
        self, home: Path, topology: Topology, alertmanager_url: str, port: int | None = None
    ) -> None:
        self.home, self.topology, self.alertmanager_url = home, topology, alertmanager_url
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        """prometheus.yml (JSON is YAML): the rules, the Alertmanager, one job of every node."""
        manager = self.alertmanager_url.split("://", 1)[-1].rstrip("/")
        return {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "2s"},
            "rule_files": [str(RULES)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [manager]}]}]},
            "scrape_configs": [
                {
                    "job_name": "kafka",
                    "scrape_timeout": SCRAPE_INTERVAL,
                    "static_configs": scrape_targets(self.topology),
                }
            ],
        }

    def command(self) -> list[str]:
        """Its config written, the command line that runs it."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "prometheus.yml").write_text(json.dumps(self.config()))
        return [
            BINARY,
            f"--config.file={self.home / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.home / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts its rules hold now, pending or firing (its own API)."""
        answer = requests.get(f"{self.url}/api/v1/alerts", timeout=10).json()
        return answer["data"]["alerts"]

    def targets_up(self) -> dict[str, bool]:
        """Each scraped target's address and whether its last scrape answered."""
        answer = requests.get(f"{self.url}/api/v1/targets", timeout=10).json()
        return {t["scrapeUrl"]: t["health"] == "up" for t in answer["data"]["activeTargets"]}
