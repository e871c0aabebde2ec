"""Broker-state probes never raise, whatever they are answered, and the state table.

The probes are attacked with malformed bodies, odd statuses and broken transports; each
answer must come back as a reading (state or "unknown" with the error), never as an
exception, and a state must never be invented from a body that does not say it."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_runbooks.probes import STATE_NAMES, PrometheusProbe, parse_agent_body, parse_exposition
from kafka_runbooks.restart.states import STUCK, UNKNOWN, WAIT_STARTING, assess

AGENT_BODIES = [
    ({"brokerState": 2, "recoveryState": "unavailable"}, 2, None, None),  # issue 13: raised AttributeError
    ({"brokerState": 2, "recovery": None}, 2, None, None),
    ({"brokerState": 2, "recovery": [1, 2]}, 2, None, None),
    ({"brokerState": 2, "recovery": {"remainingLogsToRecover": "12"}}, 2, None, None),  # a string: no count
    (
        {"brokerState": 2, "recovery": {"remainingLogsToRecover": -1, "remainingSegmentsToRecover": 3}},
        2,
        None,
        3,
    ),
    ({"brokerState": 2, "recovery": {"remainingLogsToRecover": 1.5}}, 2, None, None),
    ({"brokerState": 2, "recovery": {"remainingLogsToRecover": True}}, 2, None, None),
    ({"brokerState": 2, "recovery": {"remainingLogsToRecover": 4, "remainingSegmentsToRecover": 0}}, 2, 4, 0),
    ({"brokerState": 3}, 3, None, None),
    ({"brokerState": 1.0}, 1, None, None),
    ({"brokerState": "2"}, None, None, None),  # a string is no state: unknown, never forced (#37)
    ({"brokerState": " 3.0 "}, None, None, None),
    ({"brokerState": True}, None, None, None),
    ({"brokerState": None}, None, None, None),
    ({"brokerState": -1}, None, None, None),
    ({"brokerState": 2.5}, None, None, None),
    ({"state": 3}, None, None, None),
    ([], None, None, None),
    ("RUNNING", None, None, None),
    (3, None, None, None),
    (None, None, None, None),
]


@pytest.mark.parametrize("body,state,logs,segments", AGENT_BODIES)
def test_agent_bodies_never_raise_and_never_invent_a_state(body, state, logs, segments):
    reading = parse_agent_body(1, json.dumps(body))
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (state, logs, segments)
    assert reading.known == (state is not None)
    if state is None:
        assert reading.error and reading.error.startswith("unexpected body")


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"\xff\xfe\x00", b"NaN", b'{"brokerState": NaN}', b'{"brokerState": Infinity}', b"[" * 5000],
)
def test_agent_bodies_that_are_not_json_are_unknown(raw):
    reading = parse_agent_body(1, raw)
    assert reading.state is None and reading.error.startswith("unexpected body")


# every legal feature at once: HELP/TYPE and free comments, timestamps, labels in any order with
# escaped values, +Inf/-Inf/NaN in metrics the probe does not need, a trailing comma in labels
LEGAL_EXPOSITION = (
    "# A free comment line\n"
    "# HELP kafka_server_brokerstate The state the broker is in. (0=NOT_RUNNING,...)\n"
    "# TYPE kafka_server_brokerstate gauge\n"
    "kafka_server_brokerstate 2.0 1763900000123\n"
    "# TYPE kafka_log_remaining_logs_to_recover gauge\n"
    'kafka_log_remaining_logs_to_recover{dir="/var/lib/kafka/a",} 3.0\n'
    'kafka_log_remaining_logs_to_recover{dir="/var/lib/kafka/b \\"x\\"\\n",} 4.0 1763900000123\n'
    'kafka_log_remaining_segments_to_recover{threadNum="0",dir="/var/lib/kafka/a"} 5\n'
    'kafka_log_remaining_segments_to_recover{dir="/var/lib/kafka/a",threadNum="1"} 4\n'
    "# TYPE jvm_gc_collection_seconds summary\n"
    'jvm_gc_collection_seconds{gc="G1 Young",quantile="+Inf"} +Inf\n'
    "jvm_memory_ratio -Inf\n"
    "jvm_buffer_ratio NaN\n"
    "process_start_time_seconds 1.7e9\n"
    "process_start_time_seconds 1.7e9\n"
)

EXPOSITIONS = [
    ("kafka_server_brokerstate 3.0\n", 3, None, None),
    ("kafka_server_brokerstate 1.0\nprocess_start_time_seconds 1.7e9\n", 1, None, None),
    (
        'kafka_server_brokerstate 1.0\nkafka_log_remaining_logs_to_recover{dir="a"} 2\n'
        'kafka_log_remaining_logs_to_recover{dir="b"} 3\nkafka_log_remaining_segments_to_recover 7\n',
        1,
        5,
        7,
    ),
    ("kafka_server_brokerstate NaN\n", None, None, None),
    ("kafka_server_brokerstate +Inf\n", None, None, None),
    ("kafka_server_brokerstate -3\n", None, None, None),
    ("kafka_server_brokerstate 1\nkafka_log_remaining_logs_to_recover NaN\n", 1, None, None),
    ("kafka_server_brokerstate abc\n", None, None, None),
    ("{not prometheus at all}\n", None, None, None),
    ("<html>502 Bad Gateway</html>", None, None, None),
    ("\x00\x01\x02", None, None, None),
    ("", None, None, None),
    ("# TYPE kafka_server_brokerstate gauge\n", None, None, None),
    # issue 23: two samples of the single BrokerState were summed, 1 + 2 read as 3 RUNNING
    ("kafka_server_brokerstate 1\nkafka_server_brokerstate 2\n", None, None, None),
    ('kafka_server_brokerstate{pod="a"} 1\nkafka_server_brokerstate{pod="b"} 2\n', None, None, None),
    ("kafka_server_brokerstate 3\nkafka_server_brokerstate 3.0\n", 3, None, None),  # the same value twice
]


def test_every_legal_exposition_feature_is_read():
    reading = parse_exposition(1, LEGAL_EXPOSITION)
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (2, 7, 9)
    assert reading.process_start_ms == 1_700_000_000_000  # two equal samples are that value, not a sum


@pytest.mark.parametrize("text,state,logs,segments", EXPOSITIONS)
def test_expositions_never_raise_and_never_invent_a_state(text, state, logs, segments):
    reading = parse_exposition(1, text)
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (state, logs, segments)
    if state is None:
        assert reading.error


def test_conflicting_brokerstate_samples_are_unknown_with_the_reason_never_summed():
    reading = parse_exposition(1, "kafka_server_brokerstate 1\nkafka_server_brokerstate 2\n")
    assert reading.state is None and "conflicting samples: 1.0, 2.0" in reading.error
    assert not reading.state_not_registered  # it is there: not a broker early in its start
    assert assess(reading).kind == UNKNOWN


def test_a_state_sent_as_a_string_is_unknown_and_never_forced():
    # issue 23 read "2" as 2 because an unknown was force-restartable; an answer that is no state
    # is unknown now, and never forced (restart.states), so nothing is guessed from a string
    verdict = assess(parse_agent_body(1, b'{"brokerState": "2"}'))
    assert verdict.kind == UNKNOWN and not verdict.may_force and "'2'" in verdict.state_name


def test_the_process_start_time_is_read_as_restart_evidence():
    reading = parse_exposition(1, "kafka_server_brokerstate 3\nprocess_start_time_seconds 1763900000.123\n")
    assert reading.process_start_ms == 1763900000123


def test_an_exporter_without_brokerstate_is_a_broker_early_in_its_start_not_an_unknown():
    assert assess(parse_exposition(1, "jvm_threads_current 12\n")).kind == WAIT_STARTING
    assert assess(parse_exposition(1, "kafka_server_brokerstate NaN\n")).kind == UNKNOWN
    assert assess(parse_exposition(1, "<html>")).kind == UNKNOWN


@pytest.mark.parametrize(
    "state,kind", [(1, WAIT_STARTING), (2, WAIT_STARTING), (3, STUCK), (0, STUCK), (7, STUCK), (127, STUCK)]
)
def test_the_state_table(state, kind):
    reading = parse_agent_body(1, json.dumps({"brokerState": state}))
    assert assess(reading).kind == kind
    assert assess(reading).may_force == (kind != WAIT_STARTING)
    assert assess(None).kind == UNKNOWN and assess(None).may_force


# -- the Prometheus probe against a real HTTP server that misbehaves -----------------------------


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server API)
        kind = self.path.strip("/")
        if kind == "reset":
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.connection.close()
            return
        if kind == "truncated":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"kafka_server_brokerstate 3\n")
            self.connection.close()
            return
        if kind == "slow":
            threading.Event().wait(3)
        if kind == "recovering":  # an exporter whose broker recovers logs: 4-11 s seen (FIELD_NOTES)
            threading.Event().wait(6)
        status, body = {
            "ok": (200, b"kafka_server_brokerstate 3\n"),
            "500": (500, b"kafka_server_brokerstate 3\n"),
            "204": (204, b""),
            "302": (302, b""),
            "binary": (200, b"\xff\xfe\xfa" * 100),
            "slow": (200, b"kafka_server_brokerstate 3\n"),
            "recovering": (200, b"kafka_server_brokerstate 1\nkafka_log_remaining_logs_to_recover 1326\n"),
        }.get(kind, (404, b"no"))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/302")  # a redirect loop
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


@pytest.mark.parametrize("path", ["reset", "truncated", "slow", "500", "204", "302", "binary", "404"])
def test_the_prometheus_probe_never_raises_on_a_misbehaving_exporter(exporter, path):
    reading = PrometheusProbe(url_template=exporter + "/" + path, timeout_s=1).read(1)
    assert reading.state is None and reading.error, reading


def test_the_prometheus_probe_never_raises_on_bad_addresses(exporter):
    for probe in (
        PrometheusProbe(url_template="http://127.0.0.1:1/metrics", timeout_s=1),
        PrometheusProbe(url_template="not a url {node_id}", timeout_s=1),
        PrometheusProbe(url_template="http://{broker}/metrics", timeout_s=1),  # a template that cannot format
        PrometheusProbe(endpoints={2: exporter + "/ok"}, timeout_s=1),  # no endpoint for node 1
    ):
        reading = probe.read(1)
        assert reading.state is None and reading.error
    # the good read's timeout is generous: a 1 s budget failed once on a loaded machine
    assert PrometheusProbe(url_template=exporter + "/ok", timeout_s=30).read(1).state == 3


def test_a_combined_probe_takes_the_counts_from_whichever_source_has_them(exporter):
    from kafka_runbooks.probes import BrokerStateReading, CombinedProbe, probe_from_config

    class Fixed:
        kind = "fixed"

        def __init__(self, reading):
            self.reading = reading

        def read(self, node_id):
            return self.reading

    agent_state_1 = Fixed(BrokerStateReading(1, 1, source="strimzi-agent"))  # the agent: no counts in state 1
    gauges = Fixed(BrokerStateReading(1, 1, 40, 900, source="prometheus", process_start_ms=5))
    reading = CombinedProbe([agent_state_1, gauges]).read(1)
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (1, 40, 900)
    assert reading.process_start_ms == 5 and "counts: prometheus" in reading.source

    class Raises:
        kind = "raises"

        def read(self, node_id):
            raise RuntimeError("boom")

    unknown = CombinedProbe(
        [Raises(), Fixed(BrokerStateReading(1, None, source="p", error="HTTP 503"))]
    ).read(1)
    assert unknown.state is None and "boom" in unknown.error and "HTTP 503" in unknown.error
    built = probe_from_config(
        {"kind": "combined", "probes": [{"kind": "prometheus", "url_template": exporter + "/ok"}]}
    )
    assert built.read(1).state == 3
    with pytest.raises(ValueError, match="at least one probe"):
        probe_from_config({"kind": "combined", "probes": []})


# -- the probe timeout (issue 23 item 11) ------------------------------------------------------


def test_a_slow_answer_while_logs_recover_is_read_not_unknown(exporter, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints
    from kafka_runbooks.probes import probe_from_config

    monkeypatch.delenv("KAFKA_RUNBOOKS_PROBE_TIMEOUT_S", raising=False)  # the default timeout
    extra = {"kind": "prometheus", "url_template": exporter + "/recovering"}
    with ThreadPoolExecutor(2) as pool:  # both readers at once: one 6 s wait
        probe = pool.submit(probe_from_config(extra).read, 1)
        sweep = pool.submit(MetricsEndpoints.from_config(extra).read, 1)
    reading = probe.result()
    assert (reading.state, reading.remaining_logs, reading.error) == (1, 1326, None)
    assert assess(reading).kind == WAIT_STARTING
    assert sweep.result().ok and sweep.result().metrics.broker_state == 1


def test_the_probe_timeout_is_a_setting_the_connection_overrides(monkeypatch):
    from kafka_runbooks.errors import BadInput
    from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints
    from kafka_runbooks.probes import TIMEOUT_ENV, probe_from_config

    extra = {"kind": "prometheus", "url_template": "http://b{node_id}:9404/metrics"}
    monkeypatch.setenv(TIMEOUT_ENV, "45")
    assert probe_from_config(extra).timeout_s == 45 == MetricsEndpoints.from_config(extra).timeout_s
    assert probe_from_config({**extra, "timeout_s": 8}).timeout_s == 8
    combined = probe_from_config({"kind": "combined", "probes": [extra]})
    assert combined.probes[0].timeout_s == 45
    for bad in ("abc", "0", "-1", "inf", "nan"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(BadInput, match=TIMEOUT_ENV):
            probe_from_config(extra)
    with pytest.raises(BadInput, match="timeout_s"):
        MetricsEndpoints.from_config({**extra, "timeout_s": "soon"})


# -- issue #37, 2: only Kafka's BrokerState values are states; counts are non-negative whole numbers --

NOT_STATES = [
    1e300,
    -1e300,
    float("nan"),
    -1,
    -3.0,
    2.5,
    True,
    False,
    "2",
    "RUNNING",
    4,
    5,
    126,
    128,
    255,
    2**64,
]


@pytest.mark.parametrize("value", NOT_STATES)
def test_an_agent_value_that_is_no_broker_state_is_unknown_named_never_stuck_nor_running(value):
    reading = parse_agent_body(1, json.dumps({"brokerState": value}))
    assert reading.state is None and not reading.running and not reading.recovering
    assert repr(value) in reading.error and "is not one of Kafka's states" in reading.error
    verdict = assess(reading)
    assert verdict.kind == UNKNOWN and verdict.kind != STUCK and not verdict.may_force


@pytest.mark.parametrize("value", ["1e300", "-1", "4", "2.5", "128", "1e19"])
def test_an_exporter_value_that_is_no_broker_state_is_unknown_named_never_stuck(value):
    reading = parse_exposition(1, f"kafka_server_brokerstate {value}\n")
    assert reading.state is None and not reading.state_not_registered
    assert reading.not_a_state and repr(float(value)) in reading.error
    assert assess(reading).kind == UNKNOWN and not assess(reading).may_force


@pytest.mark.parametrize("state", sorted(STATE_NAMES))
def test_every_state_kafka_defines_is_read_from_both_sources(state):
    assert parse_agent_body(1, json.dumps({"brokerState": state})).state == state
    assert parse_exposition(1, f"kafka_server_brokerstate {float(state)}\n").state == state


@pytest.mark.parametrize(
    "count, read",
    [(0, 0), (7, 7), (7.0, 7), (2**31 - 1, 2**31 - 1), (2**31, None), (1e300, None), (-1, None)]
    + [(1.5, None), (True, None), ("12", None), (None, None)],
)
def test_recovery_counts_are_non_negative_whole_numbers_a_java_int_holds(count, read):
    body = {
        "brokerState": 2,
        "recoveryState": {"remainingLogsToRecover": count, "remainingSegmentsToRecover": count},
    }
    reading = parse_agent_body(1, json.dumps(body))
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (2, read, read)
    if isinstance(count, int | float) and not isinstance(count, bool):
        text = f"kafka_server_brokerstate 1\nkafka_log_remaining_logs_to_recover {float(count)!r}\n"
        assert parse_exposition(1, text).remaining_logs == read


def test_a_combined_probe_keeps_why_a_state_was_none():
    from kafka_runbooks.probes import CombinedProbe

    class Fixed:
        kind = "strimzi-agent"

        def read(self, node_id):
            return parse_agent_body(node_id, b'{"brokerState": 1e300}')

    reading = CombinedProbe([Fixed()]).read(2)
    assert reading.state is None and "1e+300" in reading.not_a_state and not assess(reading).may_force
