"""Issue #37: the reassigning runbooks' leader writes happen only in an approved step, and every
verify only reads and settles for a period that can see a death.

A finished rebalance run of the real glue, with its real execution state, plan summary, gate record
and lease in the data store on a tmp folder; only the cluster is stood in for, answering as
ClusterAdmin does. t-0 moved to [1, 2, 3] (led by 2: its preferred replica 1 has to be elected) and
the plan reorders t-1 from [1, 2, 3] to [3, 1, 2] (a leader-only move). What is checked is where the
writes (AlterPartitionReassignments reorders, ElectLeaders) happen: at the end of ``execute_chunks``,
behind the approval, once; never in ``verify_result`` nor, without an approval, in the cleanup.
"""

from __future__ import annotations

import inspect
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import approval as rules

try:
    from kafka_runbooks import approval_proof as proofs
except ImportError:  # the code before issue #37 took no proof (``call`` drops it)
    proofs = None
import kafka_runbooks_airflow.failed_broker  # noqa: F401 -- registers the gate's "reassign" action
from kafka_runbooks import decisions
from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.evidence import ClusterTimeouts
from kafka_runbooks.failed_broker.execute import DONE, ChunkState, ExecState, load_state, save_state
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks_airflow.hooks import kafka_admin

DAG_ID = "kafka_rebalance"
RUN_ID = "manual__2026-11-24T10:00:00+00:00"
CONN = "kafka_unit"
APPROVED_AT = datetime(2026, 11, 24, 10, 5, tzinfo=UTC)
REORDER = {"topic": "t", "partition": 1, "from": [1, 2, 3], "to": [3, 1, 2]}
SOURCE = "DescribeConfigs of broker(s) [1, 2, 3] (the largest value)"


class Cluster:
    """Stands in for ClusterAdmin; every write (a reorder, an election) is kept in ``writes``."""

    bootstrap_servers = "fake:9092"

    def __init__(self) -> None:
        self.replicas = {0: [1, 2, 3], 1: [1, 2, 3]}
        self.leaders = {0: 2, 1: 1}
        self.isr: dict[int, tuple[int, ...]] = {}
        self.writes: list[tuple] = []
        self.silent: dict[int, str] = {}
        self.session_ms = 0  # broker.session.timeout.ms as DescribeConfigs answers it

    def partitions(self) -> list[PartitionState]:
        return [
            PartitionState("t", p, self.leaders[p], 3, tuple(r), self.isr.get(p, tuple(r)))
            for p, r in self.replicas.items()
        ]

    def describe_brokers(self):
        return {b: Broker(b) for b in (1, 2, 3)}

    def read_state(self, topics=None, include_log_dirs=True):
        return ClusterState(None, self.describe_brokers(), None, self.partitions())

    def describe_topic_partitions(self, topics):
        return self.partitions()

    def describe_partitions(self, topics):
        return self.partitions()

    def describe_config_values(self, kind, names, keys, asked_of=None):
        return {name: {} for name in names}

    def cluster_timeouts(self):
        return ClusterTimeouts(self.session_ms, 2000, source=SOURCE)

    def broker_answers(self, broker_id, timeout_s=5.0):
        return self.silent.get(broker_id)

    def list_reassignments(self):
        return {}

    def alter_partition_reassignments(self, pairs):
        self.writes.append(("reorder", {f"{t}:{p}": list(r) for (t, p), r in pairs.items()}))
        for (_, p), target in pairs.items():
            self.replicas[p] = list(target)
        return {tp: None for tp in pairs}

    def elect_preferred(self, keys):
        self.writes.append(("elect", sorted(f"{t}:{p}" for t, p in keys)))
        for _, p in keys:
            self.leaders[p] = self.replicas[p][0]
        return {(t, p): None for t, p in keys}

    def incremental_alter_configs(self, kind, changes):
        self.writes.append(("configs", kind))
        return {name: "OK" for name in changes}

    def close(self) -> None:
        pass


class FakeTI:
    """XComs by (task, key) and Airflow's answers the approval check and the lease ask for."""

    try_number = 1
    map_index = -1

    def __init__(self, task_id: str, xcoms: dict, start_date: datetime) -> None:
        self.task_id, self.xcoms, self.start_date = task_id, xcoms, start_date

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_):
        return self.xcoms.get((task_ids, key))

    def get_dagrun_state(self, dag_id, run_id):
        return "running"

    def get_task_states(self, dag_id, map_index=None, task_ids=None, task_group_id=None, run_ids=None):
        return {run_ids[0]: {task_id: "running" for task_id in task_ids}}


class TaskStateStore(dict):
    """Airflow 3.3's ``context["task_state_store"]``: a task instance's own keys, kept across its pokes."""

    def set(self, key, value) -> None:
        self[key] = value


def call(fn, *args, **kwargs):
    """``fn`` with the keyword arguments it takes (the code before issue #37 took no ``context``)."""
    taken = inspect.signature(fn).parameters
    return fn(*args, **{k: v for k, v in kwargs.items() if k in taken})


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A rebalance run whose every chunk is done, its plan's summary, its gate's approval record."""
    from kafka_runbooks_airflow import gate
    from kafka_runbooks_airflow.lease import cluster_lease
    from kafka_runbooks_airflow.run_state import run_dir

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    for name, value in (("VERIFY_SETTLE_S", "0"), ("ELECTION_SETTLE_S", "0"), ("VERIFY_TIMEOUT_S", "30")):
        monkeypatch.setenv(f"KAFKA_RUNBOOKS_{name}", value)
    monkeypatch.setattr(gate, "load_policy", lambda: rules.load_policy({}.get, {}))
    decisions.forget()
    cluster = Cluster()
    monkeypatch.setattr(kafka_admin, "KafkaAdminHook", lambda kafka_config_id: SimpleNamespace(admin=cluster))
    folder = run_dir(DAG_ID, RUN_ID)
    plan = folder / "plan"
    summary = {
        "moves": [{"topic": "t", "partition": 0, "from": [4, 2, 3], "to": [1, 2, 3]}],
        "leader_moves": [REORDER],
        "spread": {
            "replicas": {"target": "5", "limit": 5, "after": 0},
            "leaders": {"target": "5", "limit": 5, "after": 0},
        },
    }
    (plan / "summary.json").write_text(json.dumps(summary))
    path = folder / "exec-state.json"
    chunk = ChunkState(0, {"t:0": [1, 2, 3]}, status=DONE, moving=["t:0"])
    save_state(path, ExecState(RUN_ID, [4], 10_000_000, [chunk], finished=True))
    checked = {
        "failed": [4],
        "plan_dir": str(plan),
        "elect_preferred_leaders": True,
        "dry_run": False,
        "require_approval": True,
    }
    xcoms = {("validate", "return_value"): checked, ("review_plan", "return_value"): {"dry_run": False}}
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        from kafka_runbooks_airflow.sensors.reassignment import KafkaReassignmentSensor

        sensor = KafkaReassignmentSensor(
            task_id="execute_chunks",
            kafka_config_id=CONN,
            approval_gate_task_id="approval_gate",
            max_poke_s=0,
        )

    stores: dict[str, TaskStateStore] = {}
    api_now = {"at": APPROVED_AT + timedelta(minutes=1)}  # Airflow's API server's clock, as a task reads it
    try:
        from kafka_runbooks.evidence import AIRFLOW_API_SERVER, Stamp
        from kafka_runbooks_airflow import api_clock

        monkeypatch.setattr(
            api_clock, "api_server_now", lambda *a: Stamp.of(api_now["at"], AIRFLOW_API_SERVER)
        )
    except ImportError:  # the code before issue #37 aged an approval from ti.start_date
        pass

    def context(task_id: str, started: datetime = APPROVED_AT + timedelta(minutes=1)) -> dict:
        api_now["at"] = started
        return {
            "task_state_store": stores.setdefault(f"{task_id}@{started.isoformat()}", TaskStateStore()),
            "dag": dag,
            "run_id": RUN_ID,
            "ti": FakeTI(task_id, xcoms, started),
            "params": {"kafka_config_id": CONN},
            "dag_run": SimpleNamespace(
                dag_id=DAG_ID,
                conf={},
                start_date=pendulum.datetime(2026, 11, 24, 10),
                triggering_user_name="bob",
            ),
        }

    def approve() -> None:
        """The gate's record of an approval of the plan as it is now (what the gate operator stores)."""
        digest = gate.current_action("reassign", context("approval_gate"))[1]
        xcoms[("approval_gate", "approval")] = {
            "outcome": rules.APPROVED,
            "digest": digest,
            "by": {"id": "alice", "name": "alice"},
            "at": APPROVED_AT.isoformat(),
            "at_clock": "Airflow's API server",
            "reason": "approved in the unit test",
            "triggered_by": "bob",
        }

    cluster_lease(context("execute_chunks"), CONN).acquire()
    return SimpleNamespace(
        cluster=cluster,
        sensor=sensor,
        context=context,
        approve=approve,
        checked=checked,
        path=path,
        xcoms=xcoms,
    )


def _writes(cluster: Cluster) -> list[tuple]:
    return [w for w in cluster.writes if w[0] != "configs"]


def test_verify_result_only_reads(run):
    """A cleared or retried verify_result re-sent the old plan's reorders and elected (past any stop or
    expiry: it never asked for the approval). Now it writes nothing, whatever it finds."""
    from kafka_runbooks_airflow import failed_broker, rebalance

    rebalance.verify(run.checked, CONN, DAG_ID, RUN_ID)
    assert _writes(run.cluster) == []
    failed_broker.verify_reassignment(run.checked, CONN, DAG_ID, RUN_ID)
    assert _writes(run.cluster) == []


def test_execute_chunks_makes_the_approved_leader_moves_once_and_a_re_run_redoes_nothing(run):
    """Every chunk done: the same approved task reorders t-1 as planned and elects the moved and
    reordered partitions' preferred leaders, then succeeds. Cleared and run again, it checks the
    approval again and sends nothing a second time."""
    run.approve()
    assert run.sensor.poke(run.context("execute_chunks")) is True
    assert _writes(run.cluster) == [("reorder", {"t:1": [3, 1, 2]}), ("elect", ["t:0", "t:1"])]
    assert run.cluster.leaders == {0: 1, 1: 3}
    assert load_state(run.path).leaders.startswith("leaders re-balanced")
    approvals = [
        r for r in decisions.made() if r.step == "approval" and r.decision == "act on the approved plan"
    ]
    assert len(approvals) >= 2  # the poke's own check, and the check right before the writes
    run.cluster.replicas[1] = [1, 2, 3]  # someone put t-1's order back since: an old plan's reorder
    run.cluster.writes.clear()
    assert run.sensor.poke(run.context("execute_chunks")) is True
    assert _writes(run.cluster) == []


def test_without_an_approval_of_exactly_this_plan_no_leader_is_moved(run):
    """The gate approved another plan (its digest differs): execute_chunks refuses, nothing written."""
    run.approve()
    run.xcoms[("approval_gate", "approval")]["digest"] = "sha256:another-plan"
    with pytest.raises(AirflowFailException, match="plan changed since the gate"):
        run.sensor.poke(run.context("execute_chunks"))
    assert _writes(run.cluster) == []


def test_a_stop_asked_after_the_chunks_sends_no_reorder(run):
    """The operator asked this run to stop once its chunks were done: the plan's leader-only moves
    are not sent (named in a record); the election of what moved, approved with the plan, is made."""
    from kafka_runbooks.failed_broker.stop import StopRequest, request_path, write_request
    from kafka_runbooks_airflow.run_state import runbook_dir

    run.approve()
    asked_ms = int(pendulum.datetime(2026, 11, 24, 11).timestamp() * 1000)
    write_request(
        request_path(runbook_dir(DAG_ID), CONN), StopRequest(CONN, "alice", "window over", asked_ms)
    )
    run.sensor.poke(run.context("execute_chunks"))
    assert [w for w in _writes(run.cluster) if w[0] == "reorder"] == []
    assert any(r.decision == "do not reorder" for r in decisions.made())


def test_the_cleanup_elects_what_a_stopped_run_moved_only_with_a_valid_approval(run):
    """The all_done cleanup elected the moved partitions' preferred leaders after a stop with no
    approval check at all. Now: an approval that expired (the cleanup started two hours after the
    gate) elects nothing and says so; one that holds elects them."""
    from kafka_runbooks_airflow.failed_broker import remove_run_throttles

    state = load_state(run.path)
    state.finished, state.stopped = False, "stopped by alice: window over"
    state.stop_request = {"request_id": "s1", "settled": True}  # the stop read back what landed
    save_state(run.path, state)
    run.approve()
    late = run.context("remove_throttles", started=APPROVED_AT + timedelta(hours=2))
    out = call(remove_run_throttles, CONN, True, DAG_ID, RUN_ID, context=late)
    assert _writes(run.cluster) == []
    assert "no election without a valid approval" in out["leaders"]["exec-state.json"]
    assert "NOT re-balanced" in load_state(run.path).leaders
    remove_run_throttles(CONN, True, DAG_ID, RUN_ID, context=run.context("remove_throttles"))
    assert _writes(run.cluster) == [("elect", ["t:0"])]
    assert load_state(run.path).leaders.startswith("leaders re-balanced")


def test_the_reorder_refuses_moves_its_proof_does_not_name(run):
    """apply_leader_moves itself asks its proof: a proof of a plan without these reorders sends none."""
    from kafka_runbooks.rebalance import apply_leader_moves

    action = {"runbook": DAG_ID, "leader_moves": [], "dry_run": False}
    digest = rules.plan_digest(action)
    proof = proofs.approved_action(
        {"outcome": rules.APPROVED, "digest": digest, "by": {"id": "alice"}}, digest, action
    )
    with pytest.raises(rules.NotApproved, match="leader_moves about to be done is not the approved one"):
        apply_leader_moves(run.cluster, [REORDER], proof)
    assert _writes(run.cluster) == []


class FakeTime:
    """The verify's clock and sleep: each sleep moves the clock (what the settle reads)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch):
    """The settle's and the retries' ``time`` (their calls look it up when made)."""
    from kafka_runbooks import retries
    from kafka_runbooks.evidence import settle

    clock = FakeTime()
    for module in (retries, settle):
        monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    return clock


def test_the_log_dir_verify_settles_for_the_session_timeout_and_asks_the_isr_itself(
    run, fake_time, monkeypatch
):
    """Asked 5 s (the suite's setting) on a cluster whose broker.session.timeout.ms is 9 s, broker 3
    killed a second ago: still registered, unfenced and in t-0's ISR, so every read of the old verify
    said 'moved'. Now the settle holds 9 s (the record says why) and its last read asks the ISR members
    themselves: 3 does not answer, the run fails naming it."""
    from kafka_runbooks_airflow.log_dir_failure import verify

    monkeypatch.setenv("KAFKA_RUNBOOKS_VERIFY_SETTLE_S", "5")
    run.cluster.session_ms = 9000
    run.cluster.silent = {3: "KafkaConnectionError: [Errno 111] ECONNREFUSED"}
    checked = {"failed": [4], "moved": ["t:0"], "kept": []}
    with pytest.raises(RunbookFailed, match="not_answering"):
        verify(checked, CONN, "kafka_log_dir_failure", RUN_ID)
    settle = [r for r in decisions.made() if r.step == "verify" and r.decision.startswith("settle")]
    assert settle and settle[0].decision == "settle 9 s"
    assert "asked 5 s, held 9 s because broker.session.timeout.ms is 9000 ms" in settle[0].reason


def test_the_rebalance_verify_holds_the_session_timeout_when_every_node_answers(run, fake_time, monkeypatch):
    """The same cluster with every broker answering: held 9 s, not the 5 s asked, then done."""
    from kafka_runbooks_airflow import rebalance

    monkeypatch.setenv("KAFKA_RUNBOOKS_VERIFY_SETTLE_S", "5")
    run.cluster.session_ms = 9000
    run.cluster.leaders = {0: 1, 1: 1}
    rebalance.verify(run.checked, CONN, DAG_ID, RUN_ID)
    assert fake_time.now >= 2 * 9  # two read-backs (moved, spread), each held 9 s
    assert _writes(run.cluster) == []


def test_the_cleanup_waits_for_a_stop_to_know_what_landed(monkeypatch, tmp_path):
    """Seen on the real stack (the console browser test): the run's cleanup read the state the Stop
    page had just made final, before the stop read back which moves had landed, found nothing
    moved and elected nothing; the page then said the election 'runs in remove_throttles'."""
    from kafka_runbooks_airflow import leader_moves

    final = type("S", (), {"stopped": "stopped by bob", "stop_request": {"request_id": "s"}})()
    settled = type(
        "S", (), {"stopped": "stopped by bob", "stop_request": {"request_id": "s", "settled": True}}
    )()
    reads = [final, final, settled]
    monkeypatch.setattr("time.sleep", lambda s: None)
    assert leader_moves._settled_stop(tmp_path / "exec-state.json", lambda p: reads.pop(0)) is settled
    assert reads == []
