"""Airflow's API server's clock and a task's state store, as the gate tests meet them.

``ApiServer``: a real HTTP server on 127.0.0.1 answering ``GET /execution/health`` as Airflow's
execution API does (200, ``{"status": "healthy"}``, an RFC 9110 ``Date`` header in whole seconds),
its ``Date`` taken from a clock the test sets; ``[core] execution_api_server_url`` points at it
through the environment, as a worker's configuration would. The gate reads it over HTTP, so the
clock reading itself is under test, not a stand-in for it.

``TaskStateStore``: the part of Airflow 3.3's ``context["task_state_store"]`` the gate uses
(``get(key, default)``, ``set(key, value, retention=None)``), its values stored as JSON (Airflow keeps
them as JSON text in its database), one store per task instance for all its tries.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ApiServer:
    """The execution API's health route with a settable clock (``now``: an aware datetime)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.requests = 0
        self.date: str | None = None  # a Date header to send instead of the clock's (None: the clock's)
        self.status = 200
        server = self

        class Health(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.requests += 1
                body = json.dumps({"status": "healthy"}).encode()
                code = server.status if self.path == "/execution/health" else 404
                self.send_response_only(code)
                self.send_header(
                    "Date",
                    server.date if server.date is not None else format_datetime(server.now, usegmt=True),
                )
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Health)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """What ``[core] execution_api_server_url`` says on a worker of this Airflow."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/execution/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class TaskStateStore:
    """One task instance's state store: kept across its tries and clears (Airflow clears it neither)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, default=None):
        return json.loads(self.values[key]) if key in self.values else default

    def set(self, key: str, value, *, retention=None) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")
        self.values[key] = json.dumps(value)
