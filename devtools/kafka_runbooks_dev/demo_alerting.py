"""The demo's alerting, beside its stack (issue #41): a real Prometheus scraping the stack's JMX
exporters with the project's rules, a real Alertmanager posting what fires to the demo Airflow's
alert receiver (``/kafka-alerts/alertmanager``, its token), and the on-call's two stand-ins, an
SMTP server filing every mail in an mbox and a receiver answering as Slack's incoming webhooks do,
filing every post as a JSON line (``kafka_runbooks_dev.receivers``).

The Airflow side is what a deployment sets: the receiver's token (``KAFKA_RUNBOOKS_ALERTS_TOKEN``),
an SMTP and a Slack-webhook connection, and the Variable ``kafka_runbooks_notify`` naming both (as
``AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY``). The ports follow the stack's port base (Prometheus +60,
Alertmanager +61, SMTP +62, Slack +63), so a second demo on another base meets none of them.
Each process runs detached in a process group of its own, recorded in ``<stack>/alerting/``,
and outlives ``make demo`` until ``make stop``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev.alertmanager import Alertmanager
from kafka_runbooks_dev.localstack.topology import Topology
from kafka_runbooks_dev.processes import group_alive
from kafka_runbooks_dev.prometheus import Prometheus
from kafka_runbooks_dev.receivers import MailReceiver, SlackWebhookReceiver

OFFSETS = {"prometheus": 60, "alertmanager": 61, "smtp": 62, "slack": 63}
SMTP_CONN, SLACK_CONN = "oncall_smtp", "oncall_slack"
ONCALL_ADDRESS = "kafka-oncall@localhost"


@dataclass(frozen=True)
class DemoAlerting:
    """The alerting of the stack whose folder is ``stack_home`` and whose port base is ``port_base``."""

    stack_home: Path
    port_base: int

    @property
    def folder(self) -> Path:
        return self.stack_home / "alerting"

    def port(self, what: str) -> int:
        """The port of ``what`` (a key of :data:`OFFSETS`)."""
        return self.port_base + OFFSETS[what]

    def _secret(self, name: str, make) -> str:
        """A secret kept in the folder (owner-only), made once: a restarted demo keeps its own."""
        path = self.folder / name
        if not path.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(make())
        return path.read_text().strip()

    @property
    def alerts_token(self) -> str:
        """The alert receiver's shared secret (Alertmanager's bearer token)."""
        return self._secret("alerts-token", lambda: secrets.token_urlsafe(24))

    @property
    def slack_token(self) -> str:
        """The stand-in webhook's path secret, in Slack's shape."""
        return self._secret("slack-token", lambda: f"T0DEMO/B0DEMO/{secrets.token_hex(12)}")

    def airflow_env(self) -> dict[str, str]:
        """The demo Airflow's environment: the receiver's token and the Variable naming both targets."""
        targets = [
            {"kind": "smtp", "conn_id": SMTP_CONN, "to": [ONCALL_ADDRESS]},
            {"kind": "slack_webhook", "conn_id": SLACK_CONN},
        ]
        return {
            "KAFKA_RUNBOOKS_ALERTS_TOKEN": self.alerts_token,
            "AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY": json.dumps({"targets": targets}),
        }

    def airflow_connections(self) -> dict[str, dict]:
        """The two connections the Variable names, to the stand-ins' ports."""
        return {
            SMTP_CONN: MailReceiver(self.port("smtp")).connection(),
            SLACK_CONN: SlackWebhookReceiver(self.slack_token, self.port("slack")).connection(),
        }

    def _processes(self, topology: Topology, airflow_url: str) -> dict[str, list[str]]:
        """Each process's command line (their config files written)."""
        am = Alertmanager(
            self.folder / "alertmanager",
            f"{airflow_url}/kafka-alerts/alertmanager",
            self.alerts_token,
            self.port("alertmanager"),
        )
        prom = Prometheus(self.folder / "prometheus", topology, am.url, self.port("prometheus"))
        receivers = [
            sys.executable,
            "-m",
            "kafka_runbooks_dev.receivers",
            f"--folder={self.folder / 'oncall'}",
            f"--smtp-port={self.port('smtp')}",
            f"--slack-port={self.port('slack')}",
            f"--slack-token={self.slack_token}",
        ]
        return {"receivers": receivers, "alertmanager": am.command(), "prometheus": prom.command()}

    def start(self, topology: Topology, airflow_url: str) -> list[str]:
        """Start what is not running; the names of those started."""
        started = []
        for name, command in self._processes(topology, airflow_url).items():
            if self.running(name):
                continue
            log = (self.folder / f"{name}.log").open("ab")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
            (self.folder / f"{name}.pid").write_text(str(process.pid))
            started.append(name)
        return started

    def running(self, name: str) -> bool:
        """Whether the recorded process group of ``name`` still runs."""
        try:
            pid = int((self.folder / f"{name}.pid").read_text())
        except (FileNotFoundError, ValueError):
            return False
        return group_alive(pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each recorded group, SIGKILL what is left after ``timeout_s``; forget them."""
        for pid_file in sorted(self.folder.glob("*.pid")):
            pid = int(pid_file.read_text())
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + timeout_s
                while group_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.2)
                if not group_alive(pid):
                    break
            pid_file.unlink()

    def where(self) -> list[str]:
        """The lines the demo prints: the ports, and where the on-call's mail and chat land."""
        oncall = self.folder / "oncall"
        return [
            f"Alerting:   Prometheus http://127.0.0.1:{self.port('prometheus')}, Alertmanager "
            f"http://127.0.0.1:{self.port('alertmanager')} (the stack's port base + 60, + 61)",
            f"On-call:    mail to {ONCALL_ADDRESS} in {oncall / 'mailbox'} (an mbox; SMTP 127.0.0.1:"
            f"{self.port('smtp')}), Slack posts in {oncall / 'slack.jsonl'} (127.0.0.1:{self.port('slack')})",
        ]
