"""A real Alertmanager (Debian's ``prometheus-alertmanager``) on loopback, routing every alert to
the project's alert receiver on an Airflow, as a deployment's would (docs/notifications.md).

Clustering off, its data in a folder of its own; grouping waits 1 s so a test sees the post within
seconds (a deployment's defaults are 30 s and 5 min). :meth:`fire` posts alerts to Alertmanager's
own API (``POST /api/v2/alerts``), as Prometheus does when a rule fires.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from kafka_runbooks_dev.loopback_daemon import LoopbackDaemon
from kafka_runbooks_dev.receivers import free_port

BINARY = "prometheus-alertmanager"


def available() -> bool:
    """Whether the Alertmanager binary is installed here (scripts/bootstrap.sh installs it)."""
    return shutil.which(BINARY) is not None


class Alertmanager(LoopbackDaemon):
    """One Alertmanager process whose only receiver posts to ``webhook_url`` with ``token``."""

    name = "alertmanager"

    def __init__(self, home: Path, webhook_url: str, token: str, port: int | None = None) -> None:
        self.home, self.webhook_url, self.token = home, webhook_url, token
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        """alertmanager.yml (JSON is YAML): every alert to the receiver, resolved ones too."""
        webhook = {
            "url": self.webhook_url,
            "send_resolved": True,
            "http_config": {
                "authorization": {"type": "Bearer", "credentials_file": str(self.home / "token")}
            },
        }
        return {
            "route": {
                "receiver": "kafka-runbooks",
                "group_by": ["..."],
                "group_wait": "1s",
                "group_interval": "2s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "kafka-runbooks", "webhook_configs": [webhook]}],
        }

    def command(self) -> list[str]:
        """Its files written (config, token: owner-only), the command line that runs it."""
        self.home.mkdir(parents=True, exist_ok=True)
        token = self.home / "token"
        token.touch(mode=0o600)
        token.write_text(self.token)
        (self.home / "alertmanager.yml").write_text(json.dumps(self.config()))
        return [
            BINARY,
            f"--config.file={self.home / 'alertmanager.yml'}",
            f"--storage.path={self.home / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]

    def fire(self, labels: dict[str, str], annotations: dict[str, str] | None = None) -> None:
        """Post one firing alert to Alertmanager's API, as a Prometheus rule that fires does."""
        alert = {
            "labels": labels,
            "annotations": annotations or {},
            "startsAt": datetime.now(UTC).isoformat(),
        }
        requests.post(f"{self.url}/api/v2/alerts", json=[alert], timeout=10).raise_for_status()

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds now (its own API: fingerprint, startsAt, labels, status)."""
        return requests.get(f"{self.url}/api/v2/alerts", timeout=10).json()
