"""kafka_broker_restart through a real Airflow: a rolling restart under load.

The roll takes one broker and every controller (the active one last), not all seven nodes:
what only Airflow adds (the gate's table, the reschedule-mode sensor, the restart back end
through its connection) shows on four nodes, and the roll of every node, watched from outside
every 200 ms, is tests/integration/test_broker_restart.py's (three fewer nodes: ~2-3 minutes
of the suite)."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from tests.helpers import create_topic, unique_topic

DAG_ID = "kafka_broker_restart"
pytestmark = pytest.mark.timeout(900)


class Producer(threading.Thread):
    """acks=all (idempotent unless told otherwise), writing until stopped; counts acknowledged and
    failed sends. A fatal client error or the thread's own death is a failure too: without that,
    a producer that died early left ``failed == []`` and proved nothing."""

    def __init__(
        self, bootstrap: str, topic: str, idempotent: bool = True, message_timeout_ms: int = 300_000
    ) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": idempotent,
                "linger.ms": 10,
                "message.timeout.ms": message_timeout_ms,
                "error_cb": self._client_error,
            }
        )
        self.topic = topic
        self.acked = 0
        self.failed: list[str] = []
        self.stop_event = threading.Event()

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.failed.append(str(err))

    def _client_error(self, err) -> None:
        if err.fatal():  # the client stops producing for good
            self.failed.append(f"fatal client error: {err}")

    def run(self) -> None:
        try:
            i = 0
            while not self.stop_event.is_set():
                try:
                    self.producer.produce(
                        self.topic, b"v" * 100, key=str(i).encode(), on_delivery=self._delivered
                    )
                except BufferError:  # the local queue is full: let deliveries drain, then go on
                    self.producer.poll(0.1)
                    continue
                self.producer.poll(0.005)
                i += 1
            self.producer.flush(300)
        except BaseException as exc:  # noqa: BLE001 - the thread's death is the test's failure
            self.failed.append(f"producer thread died: {exc!r}")


class Monitor(threading.Thread):
    """Samples the cluster; remembers every partition it ever saw below min ISR or offline."""

    def __init__(self, admin) -> None:
        super().__init__(daemon=True)
        self.admin = admin
        self.samples = 0
        self.violations: set[str] = set()
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                state = self.admin.read_state(include_log_dirs=False)
            except Exception:  # a read during a node restart may fail; the next one counts
                time.sleep(0.5)
                continue
            self.samples += 1
            for p in state.offline() + state.under_min_isr():
                # an unread min ISR cannot excuse a partition (RF == min ISR is the excused case)
                if p.min_insync_replicas is None or p.replication_factor > p.min_insync_replicas:
                    self.violations.add(f"{p.name} isr={list(p.isr)}")
            time.sleep(0.5)


def test_rolling_restart_of_every_node_under_acks_all_load(airflow_local, restore_stack, kafka_config):
    from kafka_runbooks.admin import ClusterAdmin

    stack = restore_stack
    topic = unique_topic("rolling")
    create_topic(stack.bootstrap_servers, topic, 6, 3)
    controllers = sorted(n.node_id for n in stack.topology.controller_nodes)
    chosen = [1, *controllers]
    everyone = {s.name: s.pid for s in stack.status() if s.role != "connect"}
    pids_before = {s.name: s.pid for s in stack.status() if s.node_id in chosen and s.role != "connect"}
    monitor = Monitor(ClusterAdmin(kafka_config, timeout_s=10))
    producer = Producer(stack.bootstrap_servers, topic)
    monitor.start()
    producer.start()
    try:
        airflow_local.wait_for_dag(DAG_ID, timeout=120)
        run_id = airflow_local.trigger(
            DAG_ID,
            {
                "node_ids": ",".join(map(str, chosen)),
                "reason": "e2e rolling restart",
                "operation_timeout_s": 180,
            },
        )
        request = airflow_local.wait_for_approval(DAG_ID, run_id, "approval_gate", timeout=180)
        assert "Restart Kafka nodes" in request["subject"]
        # the evidence the availability check saw, as a Markdown table the UI renders, one row per node
        rows = [line for line in request["body"].splitlines() if line.startswith("| ")]
        assert rows[0].startswith("| # | node | role | partitions hosted | leaders | under-replicated now")
        assert len(rows) == 1 + len(pids_before) and "```" not in request["body"]
        assert rows[-1].startswith(f"| {len(pids_before)} | ") and "controller (active)" in rows[-1]
        airflow_local.answer(DAG_ID, run_id, "approval_gate", [APPROVE_OPTION])
        state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=800)
        log = airflow_local.task_log_text(DAG_ID, run_id, "rolling_restart")
        assert state == "success", f"{airflow_local.task_instances(DAG_ID, run_id)}\n{log[-5000:]}"
    finally:
        producer.stop_event.set()
        producer.join(320)
        monitor.stop_event.set()
        monitor.join(30)

    assert producer.failed == [] and producer.acked > 100
    assert monitor.samples > 20 and monitor.violations == set()
    pids_after = {s.name: s.pid for s in stack.status() if s.role != "connect"}
    assert all(pids_after[n] != pids_before[n] for n in pids_before), (pids_before, pids_after)
    untouched = {n: pid for n, pid in everyone.items() if n not in pids_before}
    assert untouched and all(pids_after[n] == pid for n, pid in untouched.items()), (untouched, pids_after)
    restarted = [
        line for line in log.splitlines() if "DECISION restart" in line and ": restarted because" in line
    ]
    assert len(restarted) == len(pids_before)
    plan_log = airflow_local.task_log_text(DAG_ID, run_id, "plan_restart")
    assert "DECISION plan" in plan_log and "the active controller last" in plan_log
    assert "DECISION availability" in log and "safe to restart" in log
