"""The auto-restart sweep and the manual restart against the real Connect worker."""

from __future__ import annotations

import time

import pytest

from kafka_runbooks.connect.autorestart import sweep_cluster
from kafka_runbooks.connect.client import ConnectClient, ConnectError, UnknownConnector, UnknownTask
from kafka_runbooks.connect.manual import manual_restart
from kafka_runbooks.connect.policy import GIVE_UP, RestartPolicy
from kafka_runbooks.connect.state import JsonStateStore
from tests.connect_helpers import all_running, file_sink, status_records, task_failed, unique_name
from tests.helpers import create_topic, unique_topic

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
    connect.wait_for(name, task_failed, 60)
    return name, target


def _only(report, name):
    return next(r for r in report["connectors"] if r["name"] == name)


def test_sweep_heals_a_transient_failure_and_resets_the_count(connect, tmp_path, topic):
    name, target = _failing_sink(connect, tmp_path, topic, "heal")
    store = JsonStateStore("it-heal", tmp_path / "state")
    policy = RestartPolicy(minute_seconds=1.0)  # one policy minute = 1 s: 0, 2, 6, ... s
    mine = [name]

    first = sweep_cluster("it-heal", connect, store, policy)
    row = _only(first, name)
    assert row["action"] == "restart" and row["restart_count"] == 1
    assert [r["connector"] for r in first["restarts"] if r["connector"] in mine] == [name]
    (restart,) = [r for r in first["restarts"] if r["connector"] == name]
    assert restart["method"] == "kip-745" and restart["restarted_tasks"] == [0] and restart["calls"] == 1
    # The cause is still there: the restarted task fails again. The status can still show the
    # old FAILED right after the restart call, so first see it leave FAILED (or give the
    # restart time to take effect), then fail again.
    try:
        connect.wait_for(name, lambda st: not task_failed(st), 8, 0.1)
    except ConnectError:
        pass
    connect.wait_for(name, task_failed, 60)

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
    assert task_failed(connect.connector_status(name))  # left FAILED
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
    assert report["http_calls"] == 2  # the listing + one KIP-745 restart
    assert store.load().keys() == {mm2}


def test_manual_restart_of_one_task_of_a_running_connector(connect, tmp_path, topic, kafka_stack):
    name = unique_name("manual")
    target = tmp_path / "out" / "out.txt"
    target.parent.mkdir()
    file_sink(connect, name, target, topic, tasks=2)
    connect.created.append(name)
    connect.wait_for(name, all_running(2), 60)
    key1, key0 = f"status-task-{name}-1", f"status-task-{name}-0"
    before1 = len(status_records(kafka_stack.bootstrap_servers, key1))
    before0 = len(status_records(kafka_stack.bootstrap_servers, key0))

    result = manual_restart(connect, name, "tasks", [1])

    assert result["restarted_tasks"] == [1] and result["http_statuses"] == [204]
    assert result["after"]["tasks"] == {"0": "RUNNING", "1": "RUNNING"}
    new1 = [r["state"] for r in status_records(kafka_stack.bootstrap_servers, key1)[before1:]]
    assert new1 == ["UNASSIGNED", "RUNNING"]  # the worker stopped and started task 1
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
