"""The auto-restart sweep and the manual restart against the real Connect worker."""

from __future__ import annotations

import time

import pytest

from kafka_runbooks.connect.autorestart import sweep_cluster
from kafka_runbooks.connect.client import (
    ConnectClient,
    UnaddressableConnector,
    UnknownConnector,
    UnknownTask,
)
from kafka_runbooks.connect.manual import RestartNotSettled, manual_restart
from kafka_runbooks.connect.policy import GIVE_UP, RestartPolicy
from kafka_runbooks.connect.state import JsonStateStore
from kafka_runbooks_dev.localstack import jars
from tests.connect_helpers import (
    SINK,
    STATUS_TOPIC,
    all_running,
    connector_failed,
    create_by_post,
    file_sink,
    listed,
    refuses_ambiguous_paths,
    refusing_source,
    remove_by_tombstones,
    status_records,
    task_failed,
    unique_name,
)
from tests.helpers import create_topic, unique_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def topic(kafka_stack):
    name = unique_topic("connect-in")
    create_topic(kafka_stack.bootstrap_servers, name, 2, 3)
    return name


def _failing_sink(connect, tmp_path, topic, prefix="sink", tasks=1):
    name = unique_name(prefix)
    target = tmp_path / name / "out.txt"  # its folder does not exist yet: the task FAILS at start
    file_sink(connect, name, target, topic, tasks)
    connect.created.append(name)
    connect.wait_for(name, task_failed)
    return name, target


def _only(report, name):
    return next(r for r in report["connectors"] if r["name"] == name)


def _failed_again(kafka_stack, key: str, since: int) -> bool:
    """The worker wrote RESTARTING then FAILED for ``key`` after its ``since``-th record."""
    states = [r["state"] for r in status_records(kafka_stack.bootstrap_servers, key)[since:]]
    return "RESTARTING" in states and "FAILED" in states[states.index("RESTARTING") :]


@pytest.mark.compat(needs=jars.FILE_CONNECTORS)
def test_sweep_heals_a_transient_failure_and_resets_the_count(connect, tmp_path, topic, kafka_stack):
    name, target = _failing_sink(connect, tmp_path, topic, "heal")
    failed_before = len(status_records(kafka_stack.bootstrap_servers, f"status-task-{name}-0"))
    store = JsonStateStore("it-heal", tmp_path / "state")
    policy = RestartPolicy(minute_seconds=1.0)  # one policy minute = 1 s: 0, 2, 6, ... s
    mine = [name]

    first = sweep_cluster("it-heal", connect, store, policy)
    row = _only(first, name)
    assert row["action"] == "restart" and row["restart_count"] == 1
    assert [r["connector"] for r in first["restarts"] if r["connector"] in mine] == [name]
    (restart,) = [r for r in first["restarts"] if r["connector"] == name]
    assert restart["method"] == "kip-745" and restart["restarted_tasks"] == [0] and restart["calls"] == 1
    # The cause is still there: the restarted task fails again. The REST status can still
    # show the old FAILED right after the restart call; the worker's status topic shows the
    # restart (RESTARTING) and the new failure after it.
    wait_until(
        lambda: _failed_again(kafka_stack, f"status-task-{name}-0", failed_before),
        120,
        1,
        f"task 0 of {name} restarted and FAILED again",
    )
    connect.wait_for(name, task_failed)

    target.parent.mkdir()  # the cause goes away
    actions = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        report = sweep_cluster("it-heal", connect, store, policy)
        row = _only(report, name)
        actions.append((row["action"], row["restart_count"]))
        if row["action"] == "reset":
            break
        time.sleep(0.3)
    compact = [a for i, a in enumerate(actions) if i == 0 or a != actions[i - 1]]
    # waits for its due time, restarts (#2), is healthy, and the count resets after > 4 s healthy
    assert compact[-1] == ("reset", 0), compact
    assert ("restart", 2) in compact and compact.index(("restart", 2)) < compact.index(("recovering", 2))
    assert all(count <= 2 for _, count in compact)
    assert connect.connector_status(name).tasks[0].state == "RUNNING"
    saved = store.load()[name]
    assert saved.count == 0 and saved.total_restarts == 2 and saved.last_restart_at is not None


def test_persistent_failure_is_restarted_on_schedule_then_left_failed_with_an_alert(connect, tmp_path, topic):
    name, _ = _failing_sink(connect, tmp_path, topic, "never")
    store = JsonStateStore("it-never", tmp_path / "state")
    policy = RestartPolicy(minute_seconds=0.5)  # restarts due at 0, 1, 3, 6, 10, 15 s
    restarts, alerts = [], []
    # Sweep until the policy gives up (or a generous deadline on a loaded machine), then a
    # few seconds more to show that no seventh restart comes.
    deadline = time.time() + 90
    while time.time() < deadline and not alerts:
        report = sweep_cluster("it-never", connect, store, policy, exclude=[])
        restarts += [r for r in report["restarts"] if r["connector"] == name]
        alerts += [a for a in report["alerts"] if a.get("connector") == name]
        time.sleep(0.2)
    settle = time.time() + 5
    while time.time() < settle:
        report = sweep_cluster("it-never", connect, store, policy, exclude=[])
        restarts += [r for r in report["restarts"] if r["connector"] == name]
        time.sleep(0.2)
    assert [r["restart_count"] for r in restarts] == [1, 2, 3, 4, 5, 6]
    assert all(r["method"] == "kip-745" and r["restarted_tasks"] == [0] for r in restarts)
    saved = store.load()[name]
    assert saved.count == 6
    # never early: each restart waited at least its interval (2, 4, 6, 8, 10 policy minutes)
    times = [r["at"] for r in restarts]
    from datetime import datetime

    secs = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times]
    gaps = [b - a for a, b in zip(secs, secs[1:])]
    assert all(g >= policy.interval_seconds(k + 1) - 0.002 for k, g in enumerate(gaps)), gaps
    assert alerts and alerts[-1]["alert"] == "restarts exhausted" and alerts[-1]["restart_count"] == 6
    assert "Couldn't find or create file" in alerts[-1]["trace"]
    connect.wait_for(name, task_failed)  # left FAILED (the last restart may still be showing)
    again = sweep_cluster("it-never", connect, store, policy)
    assert _only(again, name)["action"] == GIVE_UP and not [
        r for r in again["restarts"] if r["connector"] == name
    ]


def test_one_listing_call_exclusion_and_mirrormaker_style_names(connect, tmp_path, topic):
    mm2, _ = _failing_sink(connect, tmp_path, topic, "src->tgt.MirrorSourceConnector")
    kept, _ = _failing_sink(connect, tmp_path, topic, "keep-failed")
    others = [c for c, s in connect.list_connectors().items() if s.failed and c not in (mm2, kept)]
    store = JsonStateStore("it-names", tmp_path / "state")
    client = ConnectClient(connect.url)
    report = sweep_cluster("it-names", client, store, RestartPolicy(), exclude=["keep-failed-*", *others])
    assert _only(report, mm2)["action"] == "restart"
    assert (
        _only(report, kept)["action"] == "excluded" and _only(report, kept)["excluded_by"] == "keep-failed-*"
    )
    assert report["http_calls"] == 3  # the listing, the worker's version (GET /), one KIP-745 restart
    assert store.load().keys() == {mm2}


def test_manual_restart_of_one_task_of_a_running_connector(connect, tmp_path, topic, kafka_stack):
    name = unique_name("manual")
    target = tmp_path / "out" / "out.txt"
    target.parent.mkdir()
    file_sink(connect, name, target, topic, tasks=2)
    connect.created.append(name)
    connect.wait_for(name, all_running(2))
    key1, key0 = f"status-task-{name}-1", f"status-task-{name}-0"
    before1 = len(status_records(kafka_stack.bootstrap_servers, key1))
    before0 = len(status_records(kafka_stack.bootstrap_servers, key0))

    result = manual_restart(connect, name, "tasks", [1])

    assert result["restarted_tasks"] == [1] and result["http_statuses"] == [204]
    assert result["settled"] is True and result["after"]["tasks"] == {"0": "RUNNING", "1": "RUNNING"}

    # The worker's own record of the restart: task 1 stopped (UNASSIGNED) and started
    # (RUNNING). Its writes to the status topic can lag the REST answers on a loaded
    # machine, so wait for them rather than read once.
    def new1():
        return [r["state"] for r in status_records(kafka_stack.bootstrap_servers, key1)[before1:]]

    wait_until(
        lambda: new1()[-1:] == ["RUNNING"], 120, 1, f"task 1 of {name} RUNNING again in the status topic"
    )
    assert new1() == ["UNASSIGNED", "RUNNING"]  # the worker stopped and started task 1
    assert len(status_records(kafka_stack.bootstrap_servers, key0)) == before0  # task 0 untouched


def test_manual_restart_refuses_unknown_connector_or_task_before_any_restart(connect, tmp_path, topic):
    client = ConnectClient(connect.url)
    with pytest.raises(UnknownConnector, match="does not exist"):
        manual_restart(client, "no-such-connector-xyz", "failed")
    assert client.calls == 1  # the listing only
    name, _ = _failing_sink(connect, tmp_path, topic, "unknown-task")
    client.calls = 0
    with pytest.raises(UnknownTask, match=r"has no task \[7\]; its tasks are \[0\]"):
        manual_restart(client, name, "tasks", [7])
    assert client.calls == 1
    with pytest.raises(ValueError, match="needs task_ids"):
        manual_restart(client, name, "tasks", [])
    assert client.calls == 1  # bad input: no call at all


@pytest.fixture
def tombstoned(kafka_stack, connect):
    """Names the REST API cannot delete: removed through the config topic afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        remove_by_tombstones(kafka_stack.bootstrap_servers, name)
    for name in names:
        wait_until(lambda n=name: listed(connect, n) is None, 60, 0.5, f"{name} removed")


def _others_failed(connect, *mine: str) -> list[str]:
    """FAILED connectors other tests left behind: excluded so the counts here are ours."""
    return [c for c, st in connect.list_connectors().items() if st.failed and c not in mine]


def test_an_unaddressable_name_is_reported_once_and_the_worker_keeps_its_kip745_calls(
    connect, tmp_path, topic, tombstoned, kafka_stack
):
    """Issue 15.1/15.2: one 400 on the KIP-745 call (caused by one connector's name) used to
    switch the client to the old calls for every connector after it, and the name was
    retried on every sweep without an alert."""
    bad = f"0-{unique_name('slash')}/sink"  # sorts before the other one: swept first
    create_by_post(
        connect,
        bad,
        {"connector.class": SINK, "tasks.max": "1", "topics": topic, "file": str(tmp_path / "no" / "f.txt")},
    )
    tombstoned.append(bad)
    wait_until(lambda: (st := listed(connect, bad)) and task_failed(st), 60, 0.5, f"{bad} FAILED")
    good, _ = _failing_sink(connect, tmp_path, topic, "1-after-slash")
    exclude = _others_failed(connect, bad, good)
    store = JsonStateStore("it-addr", tmp_path / "state")
    policy = RestartPolicy()
    client = ConnectClient(connect.url)
    if not refuses_ambiguous_paths(client, bad):  # a worker that serves the name: restarted like any
        first = sweep_cluster("it-addr", client, store, policy, exclude=exclude)
        assert sorted((r["connector"], r["method"]) for r in first["restarts"]) == [
            (bad, "kip-745"),
            (good, "kip-745"),
        ]
        assert first["alerts"] == [] and first["errors"] == [] and not store.load()[bad].unaddressable
        return

    first = sweep_cluster("it-addr", client, store, policy, exclude=exclude)

    assert client.kip745 is True and client.worker_version == connect.server_info()["version"]
    (restart,) = first["restarts"]
    assert (restart["connector"], restart["method"], restart["calls"]) == (good, "kip-745", 1)
    assert _only(first, bad)["action"] == "unaddressable" and _only(first, bad)["unaddressable"] is True
    (alert,) = first["alerts"]
    assert (alert["connector"], alert["alert"]) == (bad, "unaddressable name")
    assert f"'connector-{bad}'" in alert["detail"] and "config.storage.topic" in alert["detail"]
    (error,) = first["errors"]
    assert error["unaddressable"] is True and "Ambiguous URI path separator" in error["error"]
    assert store.load()[bad].unaddressable

    # the next sweep: no call for it, no second alert (the good one waits for its back-off)
    second = sweep_cluster("it-addr", ConnectClient(connect.url), store, policy, exclude=exclude)
    assert second["http_calls"] == 1  # the listing only
    assert second["alerts"] == [] and second["errors"] == []
    assert _only(second, bad)["action"] == "unaddressable"

    # what the alert says to do works: the tombstones remove it
    remove_by_tombstones(kafka_stack.bootstrap_servers, bad)
    wait_until(lambda: listed(connect, bad) is None, 60, 0.5, f"{bad} removed by its tombstones")


def test_a_restart_the_worker_refuses_is_counted_backs_off_and_gives_up_with_an_alert(
    connect, tmp_path, topic
):
    """Issue 15.2: a restart answered 500 'Failed to start connector' was 'not counted,
    retried next sweep': restarted on every sweep with no back-off and never an alert."""
    name = unique_name("refused")
    (tmp_path / "in.txt").write_text("")
    refusing_source(connect, name, topic, tmp_path / "in.txt")
    connect.created.append(name)
    connect.wait_for(name, connector_failed)
    store = JsonStateStore("it-refused", tmp_path / "state")
    policy = RestartPolicy(minute_seconds=0.5, max_restarts=3, errors_before_alert=2)  # due at 0, 1, 3 s
    exclude = _others_failed(connect, name)
    # the old calls (a worker without KIP-745): the ones a refused start answers 500 to
    client = ConnectClient(connect.url, kip745=False)
    refused, alerts, calls = [], [], 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and calls < 12:
        report = sweep_cluster("it-refused", client, store, policy, exclude=exclude)
        row = _only(report, name)
        if row["action"] == "restart_refused":
            refused.append(row)
        calls += report["http_calls"] - 1
        alerts += [a for a in report["alerts"] if a.get("connector") == name]
        if any(a["alert"] == "restarts exhausted" for a in alerts):
            break
        time.sleep(0.1)

    assert [r["restart_count"] for r in refused] == [1, 2, 3], refused
    assert all("Failed to start connector" in r["last_error"] for r in refused)
    assert [r["error_streak"] for r in refused] == [1, 2, 3]
    # the back-off applied to refused restarts: never before its interval
    from datetime import datetime

    secs = [datetime.fromisoformat(r["last_restart_at"].replace("Z", "+00:00")).timestamp() for r in refused]
    gaps = [b - a for a, b in zip(secs, secs[1:])]
    assert all(g >= policy.interval_seconds(k + 1) - 0.002 for k, g in enumerate(gaps)), gaps
    assert [a["alert"] for a in alerts] == ["restart refused", "restart refused", "restarts exhausted"]
    assert "Failed to start connector" in alerts[-1]["last_error"] and alerts[-1]["restart_count"] == 3
    assert calls == 3  # one old connector call per refused restart, nothing more
    # given up: no further call, the alert again
    again = sweep_cluster("it-refused", ConnectClient(connect.url), store, policy, exclude=exclude)
    assert again["http_calls"] == 1 and _only(again, name)["action"] == GIVE_UP
    assert [a["alert"] for a in again["alerts"]] == ["restarts exhausted"]


def test_a_manual_restart_whose_task_fails_again_is_not_reported_as_success(
    connect, tmp_path, topic, kafka_stack
):
    """Issue 15.3: it reported success whatever the status after the restart was."""
    name, target = _failing_sink(connect, tmp_path, topic, "manual-fails")
    key = f"status-task-{name}-0"
    before = len(status_records(kafka_stack.bootstrap_servers, key))
    with pytest.raises(RestartNotSettled, match=r"task 0 FAILED .*Couldn't find or create file") as err:
        manual_restart(connect, name, "failed", settle_timeout_s=30, stable_s=2)
    assert err.value.seen["task 0"][-1] == "FAILED"
    # the worker did restart it, and it failed again: its own record says so
    wait_until(lambda: _failed_again(kafka_stack, key, before), 120, 1, f"task 0 of {name} FAILED again")
    # with the warning-only setting the same outcome is returned, not raised
    result = manual_restart(
        connect, name, "tasks", [0], settle_timeout_s=3, stable_s=1, fail_if_not_settled=False
    )
    assert result["settled"] is False and result["after"]["tasks"]["0"] != "RUNNING"


def test_a_restart_whose_task_fails_again_at_once_ends_on_the_workers_status_records(
    connect, tmp_path, topic, kafka_config
):
    """Issue #39 point 7: a restart whose task fails at once (the same trace as before) waited the
    whole settle period. The workers' status topic, read from the mark taken before the restart,
    shows the restart and the new FAILED: the settle ends on that record, not on its timeout."""
    from kafka_runbooks.connect.status_log import StatusLog

    name, _ = _failing_sink(connect, tmp_path, topic, "fails-at-once")
    log = StatusLog.from_kafka_config(STATUS_TOPIC, kafka_config)
    with pytest.raises(RestartNotSettled, match="FAILED again") as err:
        manual_restart(connect, name, "failed", settle_timeout_s=120, stable_s=2, status_log=log)
    assert "not RUNNING after 120s" not in str(err.value), "ended by the settle timeout, not the evidence"
    # the workers' records end it, often before the REST status shows more than RESTARTING
    assert err.value.seen["task 0"][-1] in ("FAILED", "RESTARTING"), err.value.seen


def test_a_manual_restart_of_a_paused_connectors_task_does_not_settle(connect, tmp_path, topic):
    """A task restarted under a paused connector stays PAUSED: not RUNNING, not success."""
    name = unique_name("manual-paused")
    (tmp_path / "out").mkdir()
    file_sink(connect, name, tmp_path / "out" / "out.txt", topic)
    connect.created.append(name)
    connect.wait_for(name, all_running(1))
    resp = connect._request("PUT", f"/connectors/{name}/pause")
    assert resp.status_code == 202, resp.text
    connect.wait_for(name, lambda st: st.state == "PAUSED" and [t.state for t in st.tasks] == ["PAUSED"])
    with pytest.raises(RestartNotSettled, match=r"connector PAUSED, task 0 PAUSED not RUNNING after 3s"):
        manual_restart(connect, name, "tasks", [0], settle_timeout_s=3, stable_s=1)


def test_a_manual_restart_of_an_unaddressable_name_says_what_to_do(connect, tmp_path, topic, tombstoned):
    bad = f"{unique_name('pct')}%sink"
    create_by_post(
        connect,
        bad,
        {"connector.class": SINK, "tasks.max": "1", "topics": topic, "file": str(tmp_path / "no" / "f.txt")},
    )
    tombstoned.append(bad)
    wait_until(lambda: (st := listed(connect, bad)) and task_failed(st), 60, 0.5, f"{bad} FAILED")
    if not refuses_ambiguous_paths(ConnectClient(connect.url), bad):  # served: restarted, and says so
        with pytest.raises(RestartNotSettled, match=r"task 0 FAILED"):
            manual_restart(ConnectClient(connect.url), bad, "failed", settle_timeout_s=30, stable_s=2)
        return
    with pytest.raises(UnaddressableConnector, match="Ambiguous URI path encoding") as err:
        manual_restart(ConnectClient(connect.url), bad, "failed", settle_timeout_s=5)
    assert f"'target-state-{bad}'" in str(err.value)


def test_a_manual_restart_is_settled_only_by_a_status_read_after_it(connect, tmp_path, topic, kafka_stack):
    """Issue 23.7: the status read right after the 202 is still the one from before the
    restart (the worker applies a KIP-745 restart asynchronously): a RUNNING task whose
    restart fails must not be reported restarted on that read, even with no settle period."""
    name = unique_name("manual-stale")
    target = tmp_path / "out" / "out.txt"
    target.parent.mkdir()
    file_sink(connect, name, target, topic)
    connect.created.append(name)
    connect.wait_for(name, all_running(1))
    key = f"status-task-{name}-0"
    before = len(status_records(kafka_stack.bootstrap_servers, key))
    target.unlink(missing_ok=True)
    target.parent.rmdir()  # the running task keeps its open file; a restarted one cannot create it

    with pytest.raises(RestartNotSettled, match=r"task 0 FAILED again after the restart") as err:
        manual_restart(connect, name, "all", settle_timeout_s=30, stable_s=0)
    assert err.value.seen["task 0"][-1] == "FAILED"
    # the worker's own record: the restart (RESTARTING), then the new failure
    wait_until(lambda: _failed_again(kafka_stack, key, before), 120, 1, f"task 0 of {name} FAILED again")
