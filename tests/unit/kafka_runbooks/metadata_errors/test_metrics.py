"""Reading expositions for the metadata-error sweep: every legal exposition is read, nothing
raises into a sweep, and what cannot be read is unknown with the reason, never a sum or a zero.

Issue 23 item 8: a ``+Inf`` BrokerState raised OverflowError out of the endpoint read (the
whole cluster's sweep failed), and two BrokerState samples were summed (1 + 2 read as 3).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_runbooks.metadata_errors.discovery import BROKER, NodeRef
from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints, NodeReading
from kafka_runbooks.metadata_errors.metrics import parse
from kafka_runbooks.metadata_errors.state import NodeState
from kafka_runbooks.metadata_errors.sweep import FLAGGED, HEALTHY, UNKNOWN, assess

LOAD = "kafka_server_broker_metadata_metrics_metadata_load_error_count"
APPLY = "kafka_server_broker_metadata_metrics_metadata_apply_error_count"


def text(load="0", apply="0", state="3", extra="") -> str:
    return f"{LOAD} {load}\n{APPLY} {apply}\nkafka_server_brokerstate {state}\n{extra}"


# every legal feature at once, as the JMX exporter and other exporters write them
LEGAL = (
    "# A free comment\n"
    "# HELP kafka_server_brokerstate The state the broker is in.\n"
    "# TYPE kafka_server_brokerstate gauge\n"
    "kafka_server_brokerstate 3.0 1763900000123\n"
    f"# TYPE {LOAD} gauge\n"
    f'{LOAD}{{b="x \\"q\\"\\n",a="1",}} 2.0 1763900000123\n'
    f'{LOAD}{{a="2",b="y"}} 1\n'
    f"{APPLY} 0\n"
    'kafka_server_raft_metrics_current_leader{cluster="c"} 9001.0\n'
    "kafka_server_raft_metrics_election_latency_avg NaN\n"
    "kafka_server_raft_metrics_election_latency_max -Inf\n"
    'jvm_gc_collection_seconds{quantile="+Inf",gc="G1"} +Inf\n'
    "process_start_time_seconds 1.7e9\n"
    "process_start_time_seconds 1.7e9\n"
)


def test_every_legal_exposition_feature_is_read():
    m = parse(LEGAL)
    assert m.counters == {"metadata_load_errors": 3.0, "metadata_apply_errors": 0.0}
    assert (m.broker_state, m.raft_leader, m.process_start_s) == (3, 9001, 1.7e9)
    assert m.unreadable == {}


@pytest.mark.parametrize("value", ["+Inf", "-Inf", "NaN", "2.5", "1e+300", "-1.0", "4.0", "128.0"])
def test_a_broker_state_that_is_not_a_state_is_unknown_with_the_reason(value):
    m = parse(text(state=value))  # +Inf raised OverflowError before
    assert m.broker_state is None and value.lstrip("+").lower() in m.unreadable["broker_state"].lower()
    assert m.counters == {"metadata_load_errors": 0.0, "metadata_apply_errors": 0.0}


def test_several_different_broker_states_conflict_and_are_never_summed():
    m = parse(text(state="1", extra="kafka_server_brokerstate 2\n"))
    assert m.broker_state is None
    assert m.unreadable["broker_state"].endswith("conflicting samples: 1.0, 2.0")
    labelled = parse(
        f"{LOAD} 0\n{APPLY} 0\n"
        'kafka_server_brokerstate{pod="a"} 2\nkafka_server_brokerstate{pod="b"} 1\n'
        'kafka_controller_kafkacontroller_activecontrollercount{x="1"} 1\n'
        'kafka_controller_kafkacontroller_activecontrollercount{x="2"} 1\n'
    )
    assert labelled.broker_state is None and "conflicting" in labelled.unreadable["broker_state"]
    assert labelled.active_controller_count == 1  # the same value twice is that value


@pytest.mark.parametrize("value", ["+Inf", "NaN"])
def test_a_counter_that_is_not_finite_is_unknown_not_summed_and_not_skipped(value):
    m = parse(text(load="2", extra=f'{LOAD}{{dir="b"}} {value}\n'))
    assert "metadata_load_errors" not in m.counters and "metadata_load_errors" in m.unreadable
    assert m.counters["metadata_apply_errors"] == 0.0


def reading(body: str) -> NodeReading:
    return NodeReading(2, "http://n2/metrics", parse(body))


def test_the_sweep_calls_a_broker_with_conflicting_states_unknown_never_healthy():
    row, state = assess(
        NodeRef(2, {BROKER}), reading(text(state="1", extra="kafka_server_brokerstate 2\n")), None, 1
    )
    assert row["status"] == UNKNOWN and "conflicting samples" in row["error"]
    assert state.counters == {"metadata_load_errors": 0.0, "metadata_apply_errors": 0.0}  # those were read
    # a counter that went up is still flagged: the unreadable state hides no known increase
    row, _ = assess(
        NodeRef(2, {BROKER}), reading(text(load="4", state="1\nkafka_server_brokerstate 2")), state, 2
    )
    assert row["status"] == FLAGGED


def test_the_sweep_says_why_an_infinite_counter_is_unknown():
    prev = NodeState(counters={"metadata_load_errors": 1.0, "metadata_apply_errors": 0.0})
    row, state = assess(NodeRef(2, {BROKER}), reading(text(load="+Inf")), prev, 1)
    assert row["status"] == UNKNOWN and row["error"].startswith(f"unreadable: {LOAD} has a sample of inf")
    assert state is prev  # compared with the last known values next time
    healthy, _ = assess(NodeRef(2, {BROKER}), reading(text()), None, 1)
    assert healthy["status"] == HEALTHY


class _Exporter(BaseHTTPRequestHandler):
    """Answers like the JMX exporter (text format 0.0.4), with the body the path names."""

    BODIES = {
        "/inf": text(state="+Inf"),
        "/html": "<html>502 Bad Gateway</html>",
    }

    def do_GET(self):  # noqa: N802 (http.server API)
        body = self.BODIES.get(self.path, "").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def exporter():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_reading_nodes_never_raises_into_the_sweep(exporter):
    ep = MetricsEndpoints(endpoints={1: f"{exporter}/inf", 3: f"{exporter}/html"})
    readings = ep.read_all([(1, False, None), (3, False, None)])
    assert readings[1].ok and readings[1].metrics.broker_state is None
    assert "inf" in readings[1].metrics.unreadable["broker_state"]
    assert not readings[3].ok and readings[3].error.startswith("unparseable exposition")
