"""The test Airflow's start: the execution API's lazy start is paid while the components start.

The first request to the execution API initialises it and blocks the api-server meanwhile (20 s
and more on a loaded machine). The driver used to send it only once all four components were
healthy, so it came on top of their start; now it is sent as soon as the api-server answers.

``airflow standalone`` is stood in for by a real process (this interpreter running a small HTTP
server in the Airflow home, where the driver looks for it) that answers the health endpoint in
Airflow's own format: its scheduler, dag-processor and triggerer turn healthy only after a few
health answers, and it records every request in the order it came.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from kafka_runbooks_dev.localstack.airflow import AirflowLocal

STANDALONE = '''#!{python}
"""Stands in for `airflow standalone`: the api-server's health and execution endpoints."""
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

assert sys.argv[1:] == ["standalone"], sys.argv
answers = []

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/api/v2/monitor/health":
            starting = len(answers) < {unhealthy_answers}
            status = "unhealthy" if starting else "healthy"
            body = {{"metadatabase": {{"status": "healthy"}}}}
            for part in ("scheduler", "dag_processor", "triggerer"):
                body[part] = {{"status": status, "latest_{{}}_heartbeat".format(part): None}}
            answers.append(status)
        elif self.path == "/execution/health":
            body = {{"status": "healthy"}}
        else:
            self.send_error(404)
            return
        with open("requests.log", "a") as log:
            log.write(json.dumps({{"path": self.path, "health": answers[-1] if answers else None}}) + "\\n")
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

ThreadingHTTPServer(("127.0.0.1", int(os.environ["AIRFLOW__API__PORT"])), Handler).serve_forever()
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _airflow(tmp_path: Path, unhealthy_answers: int) -> AirflowLocal:
    """The driver with a stand-in ``airflow`` command that serves its health on a free port."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = bin_dir / "airflow"
    command.write_text(STANDALONE.format(python=sys.executable, unhealthy_answers=unhealthy_answers))
    command.chmod(0o755)
    home = tmp_path / "home"
    return AirflowLocal(home, port=_free_port(), dags_folders=tmp_path, airflow_bin=command)


def _requests(airflow: AirflowLocal) -> list[dict]:
    return [json.loads(line) for line in (airflow.home / "requests.log").read_text().splitlines()]


def test_the_execution_api_is_started_before_the_components_are_healthy(tmp_path):
    airflow = _airflow(tmp_path, unhealthy_answers=3)
    try:
        airflow.start(timeout=60)
        seen = _requests(airflow)
    finally:
        airflow.stop()
    warm_up = next(i for i, r in enumerate(seen) if r["path"] == "/execution/health")
    healthy = [i for i, r in enumerate(seen) if r["path"] != "/execution/health" and r["health"] == "healthy"]
    # it was asked while a component still reported unhealthy, and Airflow counts as started only
    # once all of them are healthy
    assert seen[warm_up]["health"] == "unhealthy", seen
    assert healthy and healthy[0] > warm_up, seen


def test_spawn_returns_at_once_and_wait_started_waits_for_health(tmp_path):
    airflow = _airflow(tmp_path, unhealthy_answers=2)
    try:
        airflow.spawn()
        assert airflow._pid() is not None  # running in its home, not yet asked anything
        assert not (airflow.home / "requests.log").exists()
        airflow.wait_started(timeout=60)
        assert airflow.is_healthy()
    finally:
        airflow.stop()
    assert airflow._pid() is None
