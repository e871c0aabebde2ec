"""The Kafka page's content, from real artifact files in a data dir (the browser test
checks the same page served by the real Airflow)."""

from __future__ import annotations

import json
import re
import threading

from kafka_runbooks import console, decision_journal
from tests.helpers import wait_until


def _report(conn: str, offline: int) -> dict:
    brokers = [
        {
            "broker_id": 1,
            "rack": "a",
            "alive": True,
            "fenced": False,
            "replica_count": 77,
            "leader_count": 21,
            "size_bytes": 10 << 20,
        },
        {
            "broker_id": 2,
            "rack": "b",
            "alive": True,
            "fenced": False,
            "replica_count": 78,
            "leader_count": 31,
            "size_bytes": 12 << 20,
        },
        {
            "broker_id": 4,
            "rack": "c",
            "alive": False,
            "fenced": True,
            "replica_count": 51,
            "leader_count": 0,
            "size_bytes": None,
        },
    ]
    return {
        "kafka_config_id": conn,
        "cluster_id": "c-1",
        "taken_at_ms": 1_795_000_000_000,
        "partitions": 103,
        "counts": {"offline": offline, "under_min_isr": 2, "at_min_isr": 0, "under_replicated": 51},
        "brokers": brokers,
        "balance": {
            "state": "balanced",
            "leaders": {"state": "out of spread", "target": "10%", "limit": 3, "spread": 10, "over_by": 7},
        },
    }


def test_the_page_shows_health_per_connection_runs_with_progress_gates_and_decisions(tmp_path, monkeypatch):
    by_conn = tmp_path / "reports" / "cluster_health" / "by_connection"
    by_conn.mkdir(parents=True)
    (by_conn / "kafka_default.json").write_text(json.dumps(_report("kafka_default", 3)))
    (by_conn / "kafka_dr.json").write_text(json.dumps(_report("kafka_dr", 0)))
    run_dir = tmp_path / "reassign" / "kafka_failed_broker_reassignment" / "manual__2026-11-23T15_00_00_00_00"
    run_dir.mkdir(parents=True)
    (run_dir / "progress.json").write_text(
        json.dumps({"line": "chunk 3 of 8 | 41% bytes (4.2 GiB of 10.3 GiB)", "percent_bytes": 41.0})
    )
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_unclean_recovery")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "plan_recovery")
    from kafka_runbooks import decisions

    decisions.record("validate", "refuse the run: nothing was done", "partitions_json <script> is not JSON")
    runs = [
        {
            "dag_id": "kafka_failed_broker_reassignment",
            "run_id": "manual__2026-11-23T15:00:00+00:00",
            "state": "running",
            "start_date": None,
            "url": "/dags/x/runs/y",
            "stop_url": "/kafka-console/runs/kafka_failed_broker_reassignment/manual__x/stop",
            "kafka_config_id": "kafka_default",
        },
        {
            "dag_id": "kafka_broker_restart",
            "run_id": "r",
            "state": "running",
            "start_date": None,
            "url": "/dags/kafka_broker_restart/runs/r",
        },
    ]
    gates = [
        {
            "dag_id": "kafka_broker_restart",
            "run_id": "r",
            "task_id": "approval_gate",
            "subject": "Restart Kafka nodes [2]?",
            "created_at": None,
            "url": "/dags/kafka_broker_restart/runs/r/tasks/approval_gate/required_actions",
        }
    ]
    view = console.overview(runs, gates)
    page = console.render_page(view)

    assert [h["kafka_config_id"] for h in view["health"]] == ["kafka_default", "kafka_dr"]
    default = page[page.index("data-conn='kafka_default'") : page.index("data-conn='kafka_dr'")]
    assert re.search(r"data-count='offline'[^>]*><b>3</b>", default)
    assert re.search(r"report of 2026-11-18T\S+, \d+ h old</span>", default)  # the last full report's age
    assert re.search(r"data-count='under_replicated'[^>]*><b>51</b>", default)
    assert (
        "data-balance='leaders'><b>out of spread</b>leaders now per live broker: target 10% (at most 3), "
        "spread 10, over by 7: a preferred-leader election moves leadership back" in default
    )
    assert "data-imbalance" not in page  # one rule for leadership, the rebalance's
    assert default.count("<rect") == 9 and "broker 4 (down)" in default  # 3 brokers x 3 bars
    assert "chunk 3 of 8 | 41% bytes" in page and "width:41%" in page
    # a running reassignment (only it) has a Stop link to its stop page, opened in the whole window; its
    # hover title says what the link does now (the stop page acts at once), not the old stop runbook's form
    assert page.count("class='stop'") == 1
    stop = re.search(r"<a class='stop' data-ui='1' target='_top' href='([^']*)' title='([^']*)'>", page)
    assert stop and stop.group(1) == "/kafka-console/runs/kafka_failed_broker_reassignment/manual__x/stop"
    assert stop.group(2).startswith(
        "Opens this run&#39;s stop page: give a reason and press Stop. It acts at once"
    )
    assert "kafka_reassignment_stop" not in page and "Trigger" not in stop.group(2)
    assert "required_actions" in page and "Restart Kafka nodes [2]?" in page
    assert (
        "refuse the run: nothing was done" in page
        and "&lt;script&gt;" in page
        and page.count("<script>") == 1
    )
    assert view["decisions"][0]["dag_id"] == "kafka_unclean_recovery"


def test_no_reports_yet_and_the_journal_only_inside_a_task(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CTX_DAG_ID", raising=False)
    assert decision_journal.append({"step": "x"}) is False and decision_journal.last() == []
    page = console.render_page(console.overview([], []))
    assert "id='no-health'" in page and "id='no-runs'" in page and "id='no-gates'" in page


def test_each_section_is_its_table_under_its_heading_or_its_empty_sentence():
    assert console._decisions([]) == "<h2>Last decisions</h2><p id='no-decisions'>None recorded yet.</p>"
    assert console._gates([]) == "<h2>Gates waiting for an answer</h2><p id='no-gates'>None.</p>"
    runs = console._runs([{"dag_id": "d", "run_id": "r", "state": "running", "url": "/u"}])
    assert runs.startswith(
        "<h2>Runs</h2><table id='runs'><tr><th>runbook</th><th>run</th><th>status</th>"
        "<th>started</th><th>ended</th><th>progress</th><th></th></tr><tr class='run' data-dag='d'>"
    )
    assert runs.endswith("</tr></table>") and runs.count("<tr") == 2


# ------------------------------------------------------------------ each run's true state (issue #24.3)


def _run(dag_id: str, run_id: str, state: str, tasks: dict[str, str], paused: bool = False) -> dict:
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "state": state,
        "start_date": None,
        "url": f"/dags/{dag_id}/runs/{run_id}",
        "dag_paused": paused,
        "tasks": tasks,
    }


def _row(page: str, run_id: str) -> str:
    start = page.index(f"<td>{run_id}</td>", page.index("<table id='runs'>"))
    return page[page.rindex("<tr class='run'", 0, start) : page.index("</tr>", start)]


def test_a_restart_waiting_at_its_gate_shows_who_may_answer_and_no_progress(tmp_path):
    """The restart wrote its roll state before its gate was answered: the page said
    "0 of 7 done | node 1: wait_ready" for a run that had not started acting."""
    roll = tmp_path / "restart" / "kafka_broker_restart" / "r1"
    roll.mkdir(parents=True)
    nodes = {str(n): {"phase": "wait_ready" if n == 1 else "pending"} for n in range(1, 8)}
    (roll / "roll-state.json").write_text(json.dumps({"order": list(range(1, 8)), "nodes": nodes}))
    run = _run(
        "kafka_broker_restart", "r1", "running", {"plan": "success", "approval_gate": "awaiting_input"}
    )
    gate = {
        "dag_id": "kafka_broker_restart",
        "run_id": "r1",
        "task_id": "approval_gate",
        "subject": "Restart 7 nodes?",
        "url": "/u",
        "assignees": [{"id": "alice", "name": "Alice Martin"}, {"id": "bob", "name": "bob"}],
    }
    view = console.overview([run], [gate], root=tmp_path)
    page = console.render_page(view)
    row = _row(page, "r1")
    assert "data-status='waiting-at-gate'" in row and "Alice Martin, bob" in row
    assert "of 7 node(s) done" not in page and view["runs"][0]["progress"] is None
    assert "<td class='who'>Alice Martin, bob</td>" in page


def test_a_queued_run_of_a_paused_dag_is_queued_because_paused_and_the_dag_is_flagged(tmp_path):
    runs = [
        _run("kafka_failed_broker_reassignment", "q1", "queued", {}, paused=True),
        _run("kafka_cluster_health", "q2", "queued", {}),
    ]
    page = console.render_page(console.overview(runs, [], root=tmp_path))
    assert "data-status='queued-because-paused'" in _row(page, "q1")
    assert "data-status='queued'" in _row(page, "q2")
    assert "<li data-paused-dag='kafka_failed_broker_reassignment'>" in page
    assert "data-paused-dag='kafka_cluster_health'" not in page


def test_a_run_frozen_by_a_pause_mid_run_is_not_running(tmp_path):
    roll = tmp_path / "restart" / "kafka_broker_restart" / "r2"
    roll.mkdir(parents=True)
    (roll / "roll-state.json").write_text(
        json.dumps({"order": [1, 2], "nodes": {"1": {"phase": "done"}, "2": {}}})
    )
    frozen = _run("kafka_broker_restart", "r2", "running", {"roll": "up_for_reschedule"}, paused=True)
    acting = _run("kafka_broker_restart", "r3", "running", {"roll": "running"})
    view = console.overview([frozen, acting], [], root=tmp_path)
    assert [(r["run_id"], r["status"]) for r in view["runs"]] == [("r2", "paused-mid-run"), ("r3", "acting")]
    page = console.render_page(view)
    assert "1 of 2 node(s) done" not in page  # no progress for a run that does not move
    assert "data-paused-dag='kafka_broker_restart'" in page


def test_a_failed_run_shows_its_reason_from_the_journal_and_a_stopped_one_its_stop(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_unclean_recovery")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "f1")
    from kafka_runbooks import decisions

    decisions.record("elect", "refuse: nothing was elected", "broker 3 holds committed records", level=40)
    stopped_dir = tmp_path / "reassign" / "kafka_failed_broker_reassignment" / "s1"
    stopped_dir.mkdir(parents=True)
    (stopped_dir / "progress.json").write_text(
        json.dumps({"line": "STOPPED (stopped by admin: x)", "stopped": "stopped by admin: x"})
    )
    runs = [
        _run("kafka_unclean_recovery", "f1", "failed", {"plan": "success", "elect": "failed"}),
        _run("kafka_failed_broker_reassignment", "s1", "failed", {"execute_chunks": "failed"}),
        _run("kafka_broker_restart", "f2", "failed", {"roll": "failed"}),
    ]
    statuses = {r["run_id"]: (r["status"], r["why"]) for r in console.overview(runs, []).get("runs")}
    assert statuses == {
        "f1": ("failed", "elect: refuse: nothing was elected because broker 3 holds committed records"),
        "s1": ("stopped", "stopped by admin: x"),
        "f2": ("failed", "task(s) failed: roll"),
    }


# ------------------------------------------------------------------ live state (issue #24.1)


def test_quorum_lag_is_read_in_the_answers_own_terms_and_unknown_stays_unknown():
    """The leader's clock is two minutes ahead of this machine: lag comes from the leader's own
    timestamps and offsets in the same DescribeQuorum answer, never from this machine's clock."""
    import time

    from kafka_runbooks.model import Quorum, QuorumMember

    leader_now = int(time.time() * 1000) + 120_000
    quorum = Quorum(
        leader_id=1,
        leader_epoch=7,
        high_watermark=900,
        voters=(
            QuorumMember(1, 900, leader_now, leader_now),
            QuorumMember(2, 880, leader_now - 3_000, leader_now - 100),
            QuorumMember(3, -1, None, None),
        ),
        observers=(QuorumMember(4, 900, None, None),),
    )
    view = console.quorum_view(quorum)
    lags = {v["node_id"]: (v["lag_offsets"], v["caught_up_ms_ago"]) for v in view["voters"]}
    assert lags == {1: (0, 0), 2: (20, 3_000), 3: (None, None)}
    page = console._quorum(view)
    assert "<tr data-voter='3'><td>3</td><td>-</td><td>unknown</td><td>unknown</td><td>unknown</td>" in page
    assert "data-voter-state='unknown'" in page and "class='voter-state bad'" in page
    assert "<td>3.0 s</td>" in page and "data-quorum-leader='1'" in page


def _silent_port():
    """A listening socket that accepts connections and never answers (a frozen broker)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    return server


def test_a_cluster_that_cannot_be_read_says_why_within_the_deadline_and_is_read_once_per_cache():
    """Real admin facades: one cluster's only broker refuses connections, the other's accepts and
    never answers. The page gets both reasons without waiting for the frozen one's own timeouts,
    and a second page load within the cache time starts no second read."""
    import socket

    from kafka_runbooks.admin import ClusterAdmin

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    frozen = _silent_port()
    servers = {"refusing": f"127.0.0.1:{closed_port}", "frozen": f"127.0.0.1:{frozen.getsockname()[1]}"}
    opened: list[str] = []

    def open_admin(conn_id: str) -> ClusterAdmin:
        opened.append(conn_id)
        return ClusterAdmin({"bootstrap.servers": servers[conn_id]}, timeout_s=3)

    reader = console.LiveReader(open_admin, deadline_s=1.0, cache_s=3600)
    try:
        first = {c["kafka_config_id"]: c for c in reader.read(["refusing", "frozen"])}
        assert first["frozen"]["error"] == "the cluster did not answer within 1 s"
        wait_until(
            lambda: "refusing" in reader._cache and "frozen" in reader._cache, 60, 0.2, "both reads ended"
        )
        again = {c["kafka_config_id"]: c for c in reader.read(["refusing", "frozen"])}
    finally:
        frozen.close()
    for conn_id in ("refusing", "frozen"):
        assert again[conn_id]["error"].startswith("ClusterUnreachable: "), again[conn_id]
    assert servers["refusing"] in again["refusing"]["error"]
    assert sorted(opened) == ["frozen", "refusing"]  # the second load was answered from the cache
    page = console.render_page(console.overview([], [], live=list(again.values())))
    assert (
        "<section class='live' data-conn='frozen'>" in page and "Cannot be read: ClusterUnreachable" in page
    )


def test_reads_of_a_fleet_run_side_by_side_and_never_hold_up_the_exit():
    """Six clusters that do not answer: each has its own read in flight (a pool of four left two
    unread until a slot freed) and each read's thread is a daemon, so a read stuck on a dead
    cluster never keeps the Airflow process from exiting; a failed read leaves nothing in flight."""
    release = threading.Event()
    started: list[str] = []

    class Hanging:
        def __enter__(self):
            release.wait(30)
            raise RuntimeError("dead cluster")

        def __exit__(self, *exc):
            return False

    def open_admin(conn_id: str):
        started.append(conn_id)
        return Hanging()

    reader = console.LiveReader(open_admin, deadline_s=0.5, cache_s=3600)
    names = [f"kafka_{i}" for i in range(6)]
    try:
        views = reader.read(names)
        assert [v["error"] for v in views] == ["the cluster did not answer within 0.5 s"] * 6
        wait_until(lambda: sorted(started) == names, 10, 0.05, "every cluster's read started")
        live = [t for t in threading.enumerate() if t.name.startswith("kafka-console-live-")]
        assert len(live) == 6 and all(t.daemon for t in live), [(t.name, t.daemon) for t in live]
    finally:
        release.set()
    wait_until(lambda: len(reader._cache) == 6 and not reader._inflight, 10, 0.05, "the reads ended")
    assert all(v["error"] == "RuntimeError: dead cluster" for _, v in reader._cache.values())


def test_a_replica_order_left_changed_by_an_unclean_recovery_is_on_the_live_section(tmp_path, monkeypatch):
    """A run killed between its reorder and its restore leaves the order changed: the page
    names the partitions from the runbook's own journal (the next run restores them first),
    and a journal that cannot be read is "unknown", never "none"."""
    from kafka_runbooks.unclean.elect import ReorderState, _remember, pending_restores

    journal = ReorderState("kafka_default", directory=tmp_path)
    _remember(journal, {"orders-3": {"topic": "orders", "partition": 3, "replicas": [1, 2, 3]}})
    pending = sorted(pending_restores(journal))
    assert pending == ["orders-3"]
    live = {"kafka_config_id": "kafka_default", "counts": {}, "brokers": [], "pending_restores": pending}
    page = console.render_page(console.overview([], [], live=[live]))
    assert "data-pending-restores='1'" in page and "orders-3" in page
    unreadable = {**live, "pending_restores": "unknown: OSError: store down"}
    page = console.render_page(console.overview([], [], live=[unreadable]))
    assert "data-pending-restores='unknown'" in page and "store down" in page
    page = console.render_page(console.overview([], [], live=[{**live, "pending_restores": []}]))
    assert "data-pending-restores" not in page


def test_a_topic_whose_min_isr_was_not_read_is_counted_unknown_live_never_within():
    """DescribeConfigs did not answer for one topic: its partitions are in neither min-ISR count,
    and the live section says how many were left out (it used to show only "0 under min ISR")."""
    from kafka_runbooks.model import Broker, LogDir, PartitionState, Quorum, QuorumMember

    class Admin:
        def ping(self):
            return "cluster-x"

        def describe_brokers(self):
            return {b: Broker(b) for b in (1, 2, 3)}

        def describe_quorum(self):
            return Quorum(1, 1, 10, (QuorumMember(1, 10, None, None),), ())

        def describe_log_dir_states(self, broker_ids, replicas=True):
            return {b: (LogDir(b, f"/d{b}", 0),) for b in broker_ids}, {}

        def describe_partitions(self):
            return [
                PartitionState("unread", 0, 1, 1, (1, 2, 3), (1,), min_insync_replicas=None),
                PartitionState("unread", 1, 2, 1, (2, 3, 1), (2, 3, 1), min_insync_replicas=None),
                PartitionState("unread", 2, -1, 1, (3, 1, 2), (3,), min_insync_replicas=None),  # offline
                PartitionState("read", 0, 1, 1, (1, 2, 3), (1, 2, 3), min_insync_replicas=2),
            ]

    live = console.read_live(Admin())
    assert live["counts"] == {
        "offline": 1,
        "under_min_isr": 0,
        "under_replicated": 1,
        "min_isr_unknown": 2,
        "voters_not_caught_up": 0,
        "voters_unknown": 0,  # the only voter leads
        "offline_dirs": 0,
    }
    page = console._live({**live, "kafka_config_id": "kafka_default"})
    assert re.search(
        r"class='tile warn' data-live-count='min_isr_unknown'[^>]*><b>2</b>Min ISR unknown", page
    )
    known = console._live(
        {**live, "kafka_config_id": "k", "counts": {**live["counts"], "min_isr_unknown": 0}}
    )
    assert "min_isr_unknown" not in known  # no "0 unknown" tile


def test_a_registered_broker_that_stopped_fetching_metadata_is_not_shown_up():
    """A broker killed a moment ago stays registered and unfenced in DescribeCluster until its
    session times out; the quorum leader's own answer already says it stopped fetching the
    metadata log. "up" only while it fetches (by the leader's clock, never the worker's);
    a broker the quorum does not report is "unknown", never "up"."""
    from kafka_runbooks.model import Broker, LogDir, PartitionState, Quorum, QuorumMember

    leader_now = 1_000_000  # the leader's clock, far from this machine's

    class Admin:
        def ping(self):
            return "cluster-x"

        def describe_brokers(self):
            return {b: Broker(b) for b in (1, 2, 3, 4)}

        def describe_quorum(self):
            observers = (
                QuorumMember(1, 10, leader_now - 200, leader_now - 200),
                QuorumMember(2, 10, leader_now - 7_400, leader_now - 7_400),  # killed 7 s ago
                QuorumMember(3, 10, None, None),  # no fetch time reported
            )
            voters = (QuorumMember(9001, 10, leader_now, leader_now),)
            return Quorum(9001, 1, 10, voters, observers, fetch_timeout_ms=2000)  # as the facade reads it

        def describe_log_dir_states(self, broker_ids, replicas=True):
            assert broker_ids == [1] and replicas is False, "only a serving broker, for its dirs alone"
            return {1: (LogDir(1, "/d1", 0),)}, {}

        def describe_partitions(self):
            return [PartitionState("t", 0, 1, 1, (1, 2, 3), (1, 2, 3), min_insync_replicas=2)]

    states = {b["broker_id"]: b["state"] for b in console.read_live(Admin())["brokers"]}
    assert states == {
        1: "up",
        2: "registered, no metadata fetch for 7 s (controller's clock)",
        3: "registered, metadata fetch unknown",
        4: "registered, metadata fetch unknown",  # not among the quorum's observers
    }
    page = console._live_brokers(console.read_live(Admin())["brokers"])
    assert "<td class='state bad'>registered, no metadata fetch for 7 s" in page
    assert "<td class='state'>up</td>" in page


def test_a_dead_voter_and_an_offline_log_dir_are_flagged_live():
    """Issue #39 point 5: a voter killed 12.6 s ago (by the leader's clock) sat unflagged under a
    green tile of the last report, and an offline log dir showed only as under-replicated partitions
    with every broker "up" until the next health report."""
    from kafka_runbooks.model import Broker, LogDir, PartitionState, Quorum, QuorumMember

    leader_now = 5_000_000

    class Admin:
        def ping(self):
            return "cluster-x"

        def describe_brokers(self):
            return {b: Broker(b) for b in (1, 2)}

        def describe_quorum(self):
            voters = (
                QuorumMember(9001, 50, leader_now, leader_now),
                QuorumMember(9002, 50, leader_now - 100, leader_now - 100),
                QuorumMember(9003, 42, leader_now - 12_600, leader_now - 12_600),  # killed
            )
            observers = tuple(QuorumMember(b, 50, leader_now - 50, leader_now - 50) for b in (1, 2))
            return Quorum(9001, 3, 50, voters, observers, fetch_timeout_ms=2000)

        def describe_log_dir_states(self, broker_ids, replicas=True):
            return {1: (LogDir(1, "/d1a", 0), LogDir(1, "/d1b", 57)), 2: (LogDir(2, "/d2", 0),)}, {}

        def describe_partitions(self):
            return [PartitionState("t", 0, 2, 1, (1, 2), (2,), min_insync_replicas=1)]

    live = console.read_live(Admin())
    assert live["counts"]["voters_not_caught_up"] == 1 and live["counts"]["offline_dirs"] == 1
    states = {b["broker_id"]: b["state"] for b in live["brokers"]}
    assert states == {1: "up; log dir(s) OFFLINE: /d1b", 2: "up"}
    page = console._live({**live, "kafka_config_id": "kafka_default"})
    assert re.search(
        r"class='tile bad' data-live-count='voters_not_caught_up'[^>]*><b>1</b>Voters not caught up", page
    )
    assert re.search(r"class='tile bad' data-live-count='offline_dirs'[^>]*><b>1</b>Offline log dirs", page)
    assert "<td class='state bad'>up; log dir(s) OFFLINE: /d1b</td>" in page
    row = page.split("<tr data-voter='9003'>", 1)[1].split("</tr>", 1)[0]
    assert "<td>12.6 s</td>" in row and "class='voter-state bad' data-voter-state='not caught up'" in row


def test_a_report_is_outranked_by_the_live_read_of_its_connection_and_never_green_beside_it():
    """A green "spare voter: 3 of 3 caught up" tile of a report sat beside a voter dead now: with a
    live read of the same connection, the report's tiles are grey and it says it is outranked."""
    report = {
        "kafka_config_id": "kafka_default",
        "taken_at_ms": 1,
        "age_s": 290,
        "counts": {"offline": 0},
        "quorum": {
            "has_spare": True,
            "voters": [{"node_id": 9003, "state": "caught up"}],
            "caught_up_voters": [9003],
        },
    }
    alone = console._health(report)
    assert "class='tile ok' data-quorum-spare='true'" in alone and "outranked" not in alone
    beside = console._health(report, live_read=True)
    assert "class='tile ok" not in beside and "class='tile stale' data-quorum-spare='true'" in beside
    assert "4 min old: the live read of this connection above is newer and outranks it" in beside
    view = {
        "generated_at": "now",
        "live": [{"kafka_config_id": "kafka_default", "counts": {}, "brokers": [], "quorum": {}}],
        "health": [report],
        "runs": [],
        "gates": [],
        "decisions": [],
    }
    assert "class='tile stale' data-quorum-spare='true'" in console.render_page(view)
    unread = {**view, "live": [{"kafka_config_id": "kafka_default", "error": "not read within 4 s"}]}
    assert "class='tile ok' data-quorum-spare='true'" in console.render_page(unread), (
        "no live read: no outranking"
    )


def test_a_run_that_adopted_nothing_shows_no_progress_instead_of_all_0_chunks_done(tmp_path):
    """At a heal's start the page read "all 0 chunk(s) done | 100% bytes (0 B of 0 B)": the empty
    adopted state's progress, before the plan's own existed."""
    folder = tmp_path / "reassign" / "kafka_failed_broker_reassignment" / "r1"
    folder.mkdir(parents=True)
    (folder / "adopt-progress.json").write_text(json.dumps({"chunks": 0, "line": "all 0 chunk(s) done"}))
    assert console.run_progress("kafka_failed_broker_reassignment", "r1", tmp_path) is None
    (folder / "progress.json").write_text(json.dumps({"chunks": 3, "line": "chunk 1 of 3"}))
    assert console.run_progress("kafka_failed_broker_reassignment", "r1", tmp_path)["line"] == "chunk 1 of 3"


def test_a_broker_in_log_recovery_is_said_live_with_what_is_left_from_its_own_probe():
    """Issue #39 point 5: a broker in log recovery showed only "fenced"; the segments left were only
    in a restart decision's raw facts. Brokers not serving are asked their own BrokerState (the
    restart runbook's probe), side by side and within a deadline: a hung metrics endpoint is said
    as not read, a state not reported as unknown, never as "not recovering"."""
    import threading

    from kafka_runbooks.console_states import BrokerStates
    from kafka_runbooks.model import Broker, LogDir, PartitionState, Quorum, QuorumMember
    from kafka_runbooks.probes import STARTING, BrokerStateReading

    leader_now = 9_000_000
    hung = threading.Event()

    class Admin:
        def ping(self):
            return "cluster-x"

        def describe_brokers(self):
            return {1: Broker(1), **{b: Broker(b, fenced=True) for b in (2, 3, 4, 5)}}

        def describe_quorum(self):
            observers = (QuorumMember(1, 50, leader_now - 50, leader_now - 50),)
            voters = (QuorumMember(9001, 50, leader_now, leader_now),)
            return Quorum(9001, 3, 50, voters, observers, fetch_timeout_ms=2000)

        def describe_log_dir_states(self, broker_ids, replicas=True):
            return {1: (LogDir(1, "/d1", 0),)}, {}

        def describe_partitions(self):
            return [PartitionState("t", 0, 1, 1, (1, 2), (1,), min_insync_replicas=1)]

    class Probe:
        asked: list[int] = []

        def read(self, node_id):
            self.asked.append(node_id)
            if node_id == 2:
                return BrokerStateReading(2, STARTING, 12, 3400, source="prometheus")
            if node_id == 3:
                hung.wait(30)  # a frozen broker's exporter
            if node_id == 4:
                return BrokerStateReading(4, None, source="prometheus", error="ConnectionError: refused")
            return BrokerStateReading(node_id, STARTING, source="prometheus")  # counts not sampled

    probe = Probe()
    try:
        live = console.read_live(Admin(), BrokerStates(probe))
    finally:
        hung.set()
    assert sorted(probe.asked) == [2, 3, 4, 5], "the serving broker is not asked"
    states = {b["broker_id"]: b["state"] for b in live["brokers"]}
    assert states == {
        1: "up",
        2: "fenced; in log recovery: 12 logs and 3400 segments still to recover (BrokerState STARTING)",
        3: "fenced; BrokerState not read within 2 s (its metrics endpoint did not answer)",
        4: "fenced; BrokerState unknown (ConnectionError: refused)",
        5: "fenced; BrokerState STARTING: log recovery possible, recovery counts unknown (no source reports them now)",
    }
    assert live["counts"]["in_log_recovery"] == 1
    assert live["brokers"][1]["broker_state"]["remaining_segments_to_recover"] == 3400
    page = console._live({**live, "kafka_config_id": "kafka_default"})
    assert re.search(
        r"class='tile bad' data-live-count='in_log_recovery'[^>]*><b>1</b>Brokers in log recovery", page
    )
    assert "<td class='state bad'>fenced; in log recovery: 12 logs and 3400 segments" in page

    none = console.read_live(Admin(), BrokerStates(None, "no connection kafka_broker_probe_default"))
    assert {b["state"] for b in none["brokers"][1:]} == {
        "fenced; BrokerState not read (no connection kafka_broker_probe_default)"
    }
    assert "in_log_recovery" not in none["counts"], "not asked is unknown, never 0"
    assert "in_log_recovery" not in console.read_live(Admin())["counts"]


def test_the_alerts_the_intake_took_are_listed_with_what_it_did():
    """The page lists the alert intake's decisions (issue #41): which alert, firing or resolved,
    the run it started or why none; nothing else of the journal."""
    records = [
        {
            "step": "alert",
            "subject": "KafkaBrokerDown",
            "decision": "start",
            "at_ms": 1_796_000_000_000,
            "reason": "kafka_failed_broker_sweep run alert__KafkaBrokerDown__ab__cd: the failed-broker sweep ...",
            "observed": {"status": "firing"},
            "record_id": "r1",
        },
        {"step": "notify", "decision": "not notified", "reason": "x"},
        {
            "step": "alert",
            "subject": "DiskAlmostFull",
            "decision": "unrouted",
            "at_ms": 1_796_000_000_000,
            "reason": "no runbook handles the alert DiskAlmostFull",
            "observed": {"status": "firing"},
        },
    ]
    shown = console.alert_records(records)
    assert [r["subject"] for r in shown] == ["KafkaBrokerDown", "DiskAlmostFull"]
    html = console._alerts(shown)
    assert html.startswith("<h2>Alerts</h2><table id='alerts'>") and html.count("<tr class='alert'") == 2
    assert (
        "<td>KafkaBrokerDown</td><td>firing</td><td><b>start</b></td>" in html and "id='decision-r1'" in html
    )
    assert console._alerts([]).startswith("<h2>Alerts</h2><p id='no-alerts'>None taken yet")
