"""Serving a recorded exposition in place of a node's metrics endpoint.

Real metadata errors cannot be produced on demand, so the tests record a real node's
exposition from its real endpoint, raise or lower one counter in it, and serve that text
over HTTP from a local server; the sweep is pointed at that server for that node.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

LOAD = "kafka_server_broker_metadata_metrics_metadata_load_error_count"
APPLY = "kafka_server_broker_metadata_metrics_metadata_apply_error_count"
CONTROLLER = "kafka_controller_kafkacontroller_metadataerrorcount"
PROCESS_START = "process_start_time_seconds"  # the exporter's: moves when the process restarts


def record(url: str) -> str:
    """A real node's exposition, as its JMX exporter serves it now."""
    resp = requests.get(url, timeout=30)
    resp.raise_for_status()
    return resp.text


def counter(text: str, metric: str) -> float:
    match = re.search(rf"^{metric} (\S+)$", text, re.MULTILINE)
    assert match, f"{metric} is not in the recorded exposition"
    return float(match.group(1))


def with_counter(text: str, metric: str, value: float) -> str:
    """The exposition with ``metric`` set to ``value`` (the metric must be there)."""
    counter(text, metric)
    return re.sub(rf"^{metric} \S+$", f"{metric} {float(value)}", text, count=1, flags=re.MULTILINE)


class ExpositionServer:
    """``GET /metrics`` answers with ``self.text`` (text/plain; version=0.0.4), on 127.0.0.1."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                outer.requests += 1
                body = outer.text.encode()
                self.send_response(200 if self.path.startswith("/metrics") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the port: the next read is refused. Stopping twice is a no-op."""
        if not self._thread.is_alive():
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
