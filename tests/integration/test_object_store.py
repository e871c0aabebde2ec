"""The data store on a real S3-compatible server (S3Proxy 4.1.0 from Maven Central) and on a
local folder: state written through it lands in the bucket and nowhere on the worker's disk,
no write leaves half a file, and compare-and-set is only offered where the store honours it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from kafka_runbooks import decision_journal, storage
from kafka_runbooks.connect.policy import RestartState
from kafka_runbooks.connect.state import JsonStateStore
from kafka_runbooks.failed_broker.failures import FailureStore
from kafka_runbooks.lease import ClusterLease, Holder, LeaseHeld


@pytest.fixture
def s3_env(s3proxy, monkeypatch, tmp_path, request):
    """The data location is a fresh prefix of the S3Proxy bucket; the local dirs are empty folders."""
    prefix = f"t-{request.node.name[:40]}-{os.getpid()}"
    for key, value in s3proxy.env(prefix).items():
        monkeypatch.setenv(key, value)
    local = tmp_path / "worker-local"
    local.mkdir()
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(local))
    monkeypatch.setenv("HOME", str(local))
    storage._STORES.clear()
    yield prefix, local
    storage._STORES.clear()


def _objects(s3proxy, prefix: str) -> list[str]:
    """What the S3Proxy filesystem back end holds under ``prefix``: real files on its side."""
    root = s3proxy.data_dir / s3proxy.bucket / prefix
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_sweep_state_lives_in_the_bucket_and_not_on_the_worker(s3proxy, s3_env):
    prefix, local = s3_env
    connect = JsonStateStore("connect_default")
    with connect.locked():
        connect.save({"sink-a": RestartState(count=2, last_restart_at=1_800_000_000.0)})
    failures = FailureStore("kafka_default")
    failures.write_entries({"4": {"first_seen_down_ms": 1}})

    assert _objects(s3proxy, prefix) == [
        "state/connect_autorestart/connect_default.json",
        "state/failed_brokers/kafka_default.json",
    ]
    assert list(local.rglob("*")) == []
    # read back by a second process's view of the store (a fresh Store, no cache)
    storage._STORES.clear()
    assert JsonStateStore("connect_default").load()["sink-a"].count == 2
    assert str(connect.path).startswith(f"s3://{s3proxy.bucket}/{prefix}/state/")


def test_an_object_is_replaced_whole_or_not_at_all(s3proxy, s3_env):
    prefix, _ = s3_env
    s3 = storage.store()
    s3.write_text("state/x/a.json", json.dumps({"v": 1}))
    big = json.dumps({"v": 2, "pad": "x" * 3_000_000})
    s3.write_text("state/x/a.json", big)
    assert json.loads(s3.read_text("state/x/a.json"))["v"] == 2
    assert s3.list("state/x") == ["state/x/a.json"]
    assert s3.read_text("state/x/missing.json") is None
    assert s3.delete("state/x/a.json") and not s3.exists("state/x/a.json")


def test_s3proxy_refuses_a_second_create_and_a_stale_swap_so_the_lease_holds(s3proxy, s3_env):
    """S3Proxy 4.1.0 honours If-None-Match: * and If-Match: <ETag> on PutObject (2.6.0 did not):
    the store's probe says so, and a lease taken there cannot be taken twice."""
    s3 = storage.store()
    bucket, key = s3._bucket_key("probe/raw")
    s3.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"first")
    with pytest.raises(OSError):
        s3.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert s3.read_text("probe/raw") == "first"

    assert s3.supports_conditional_writes() is True
    assert s3.create("state/x/c.json", "1") and not s3.create("state/x/c.json", "2")
    assert not s3.swap("state/x/c.json", "stale", "3") and s3.swap("state/x/c.json", "1", "4")
    assert s3.read_text("state/x/c.json") == "4"
    records = storage.Records(s3, "state/leases")
    first = ClusterLease(records, "kafka_a", Holder("kafka_broker_restart", "r1"))
    second = ClusterLease(records, "kafka_a", Holder("kafka_unclean_recovery", "r2"))
    assert first.acquire().acquired
    held = second.acquire()
    assert not held.acquired and held.record.holder == first.holder
    with pytest.raises(LeaseHeld):
        second.acquire_or_raise()
    first.release()
    assert second.acquire().acquired


def test_a_store_that_ignores_conditional_writes_is_refused_for_compare_and_set(s3proxy, s3_env, monkeypatch):
    """A server that ignores the conditions looks, from here, exactly like a client that never
    sends them: drop them on the way to the real server, and the probe must notice and refuse
    to hand out a lease it could not keep."""
    s3 = storage.Store(storage.data_url())  # a fresh store: its probe has not run yet
    send = s3.fs.call_s3

    def without_conditions(method, *args, **kwargs):
        kwargs.pop("IfNoneMatch", None)
        kwargs.pop("IfMatch", None)
        return send(method, *args, **kwargs)

    monkeypatch.setattr(s3.fs, "call_s3", without_conditions)  # fsspec shares the instance: undo after
    assert s3.supports_conditional_writes() is False
    with pytest.raises(storage.ConditionalWritesUnsupported, match="ignores conditional writes"):
        s3.create("state/leases/kafka_a.json", "{}")
    lease = ClusterLease(storage.Records(s3, "state/leases"), "kafka_a", Holder("kafka_broker_restart", "r1"))
    with pytest.raises(storage.ConditionalWritesUnsupported):
        lease.acquire()
    assert not s3.exists("state/leases/kafka_a.json")


@pytest.mark.parametrize(
    "method,refusal",
    [("put_object", "ignores If-Match on PUT"), ("delete_object", "ignores If-Match on DELETE")],
)
def test_a_store_that_honours_if_none_match_but_ignores_if_match_is_refused(
    s3proxy, s3_env, monkeypatch, method, refusal
):
    """Issue 23: the probe tried only If-None-Match, so a store ignoring If-Match on PUT or
    DELETE passed it, and a lease could be handed on or released twice. The condition is
    dropped before the request is signed (SigV4 signs If-Match: a proxy dropping it on the
    wire would break the signature, not imitate a store): on the wire that is a request
    without the header, answered by the real S3Proxy as such a store would answer it."""
    s3 = storage.Store(storage.data_url())  # a fresh store: its probe has not run yet
    send = s3.fs.call_s3

    def without_if_match(name, *args, **kwargs):
        if name == method:
            kwargs.pop("IfMatch", None)
        return send(name, *args, **kwargs)

    monkeypatch.setattr(s3.fs, "call_s3", without_if_match)  # fsspec shares the instance: undo after
    assert s3.supports_conditional_writes() is False
    with pytest.raises(storage.ConditionalWritesUnsupported, match=refusal):
        s3.create("state/leases/kafka_a.json", "{}")
    lease = ClusterLease(storage.Records(s3, "state/leases"), "kafka_a", Holder("kafka_broker_restart", "r1"))
    with pytest.raises(storage.ConditionalWritesUnsupported):
        lease.acquire()
    assert not s3.exists("state/leases/kafka_a.json")
    assert s3.list(storage.PROBE_KEY) == []  # the probe cleans up after itself


def test_the_decision_journal_is_one_object_per_record_in_the_bucket(s3proxy, s3_env, monkeypatch):
    prefix, local = s3_env
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_failed_broker_reassignment")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__1")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "validate")
    for i in range(3):
        assert decision_journal.append({"decision": f"step {i}"})
    newest = decision_journal.last(2)
    assert [r["decision"] for r in newest] == ["step 2", "step 1"]
    assert len([o for o in _objects(s3proxy, prefix) if o.startswith("decisions/")]) == 3
    assert list(local.rglob("*")) == []


def test_folders_go_up_and_come_back_whole(s3proxy, s3_env, tmp_path):
    s3 = storage.store()
    src = tmp_path / "plan"
    (src / "chunks").mkdir(parents=True)
    (src / "summary.json").write_text('{"chunks": 1}')
    (src / "chunks" / "chunk-001.json").write_text('{"partitions": []}')
    (src / "._SUCCESS.crc").write_text("")
    assert s3.upload_dir(src, "reassign/run1/plan") == [
        "reassign/run1/plan/chunks/chunk-001.json",
        "reassign/run1/plan/summary.json",
    ]
    back = s3.download_dir("reassign/run1/plan", tmp_path / "back")
    assert (back / "chunks" / "chunk-001.json").read_text() == '{"partitions": []}'


def test_a_file_another_process_adds_to_a_listed_folder_is_seen(s3proxy, s3_env):
    """A Spark job writes a plan where this worker listed an older one: the new file is read."""
    import fsspec

    mine = storage.store()
    other = storage.Store(mine.url)  # another process: its own connection and caches
    other._fs = fsspec.filesystem("s3", skip_instance_cache=True, **storage.storage_options(mine.url))
    other.write_text("plan/summary.json", "{}")
    assert mine.list("plan") == ["plan/summary.json"]  # this process has listed the folder
    other.delete("plan/summary.json")
    other.write_text("plan/error.json", '{"error": "x"}')
    assert mine.list("plan") == ["plan/error.json"]
    assert mine.exists("plan/error.json")
    assert mine.read_text("plan/error.json") == '{"error": "x"}'
    assert not mine.exists("plan/summary.json")


# ---------------------------------------------------------------- the local store


def test_a_failed_local_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    local = storage.Store(str(tmp_path))
    local.write_text("state/k/a.json", "old")

    def crash(_fd):
        raise OSError("disk full")

    monkeypatch.setattr(storage.os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        local.write_text("state/k/a.json", "new and longer")
    assert (tmp_path / "state/k/a.json").read_text() == "old"
    assert sorted(p.name for p in (tmp_path / "state/k").iterdir()) == ["a.json"]


def _race_create(folder: str, barrier, wins, i: int) -> None:
    barrier.wait()
    if storage.Store(folder).create("state/leases/kafka_a.json", f"racer {i}"):
        wins.put(i)


def test_local_create_lets_exactly_one_racing_process_win(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, wins = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_race_create, args=(str(tmp_path), barrier, wins, i)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    winners = []
    while not wins.empty():
        winners.append(wins.get())
    assert len(winners) == 1
    assert (tmp_path / "state/leases/kafka_a.json").read_text() == f"racer {winners[0]}"


def test_local_swap_only_replaces_what_was_read(tmp_path):
    local = storage.Store(str(tmp_path))
    assert local.create("l/a.json", "one") and not local.create("l/a.json", "two")
    assert not local.swap("l/a.json", "stale", "three")
    assert local.swap("l/a.json", "one", "three") and local.read_text("l/a.json") == "three"
    assert local.swap("l/a.json", "three", None) and not local.exists("l/a.json")


def test_a_key_may_not_leave_the_data_location(tmp_path):
    with pytest.raises(ValueError, match="climb out"):
        storage.Store(str(tmp_path)).write_text("../outside.json", "x")
    assert not (tmp_path.parent / "outside.json").exists()


def test_one_setting_picks_the_location(monkeypatch, tmp_path):
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path / "dir"))
    assert storage.data_url() == str(tmp_path / "dir")
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_URL", "s3://bucket/prefix/")
    assert storage.data_url() == "s3://bucket/prefix"
    assert storage.Store(storage.data_url()).url_of("state/a.json") == "s3://bucket/prefix/state/a.json"
    assert storage.protocol_of("s3a://bucket/p") == "s3"
    assert Path(storage.Store(str(tmp_path)).url_of("a")) == tmp_path / "a"


def test_credentials_come_from_the_named_connection(s3proxy, s3_env, monkeypatch):
    """With only KAFKA_RUNBOOKS_DATA_CONN_ID naming an aws connection (no AWS_* variables),
    the store reaches S3Proxy with the connection's keys."""
    from kafka_runbooks_airflow.data_store import connection_options, options_from_connection

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS")
    extra = {"endpoint_url": s3proxy.endpoint, "region_name": "us-east-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KR_DATA",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "kafka-runbooks",
                "password": "kafka-runbooks-secret",
                "extra": extra,
            }
        ),
    )
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_CONN_ID", "kr_data")
    storage.set_options_provider(connection_options)
    try:
        s3 = storage.store()
        s3.write_text("state/x/a.json", "{}")
        assert s3.read_text("state/x/a.json") == "{}"
        assert "kafka-runbooks-secret" not in repr(s3)
    finally:
        storage.set_options_provider(connection_options)  # as the package registered it
    assert options_from_connection("abfs", "acct", "k", {}) == {"account_name": "acct", "account_key": "k"}
    assert options_from_connection("gs", None, None, {"token": "/k.json"}) == {"token": "/k.json"}


def test_reports_are_published_to_the_bucket_and_the_kafka_page_reads_them_there(s3proxy, s3_env, tmp_path):
    from kafka_runbooks import console
    from kafka_runbooks.metadata_errors.sweep import write_report
    from kafka_runbooks_airflow.reports import publish_health_report

    prefix, local = s3_env
    spark_out = tmp_path / "snapshot" / "health"  # the Spark job's own output folder
    spark_out.mkdir(parents=True)
    (spark_out / "report.json").write_text(json.dumps({"cluster_id": "c1", "counts": {"offline": 2}}))
    summary = publish_health_report(str(spark_out.parent), conn_id="kafka_b")
    assert summary["latest"] == f"s3://{s3proxy.bucket}/{prefix}/reports/cluster_health/latest.json"
    where = write_report({"nodes": []})
    assert where.endswith("/reports/metadata_errors/latest.json") and where.startswith("s3://")

    assert set(_objects(s3proxy, prefix)) == {
        "reports/cluster_health/latest.json",
        "reports/cluster_health/by_connection/kafka_b.json",
        "reports/metadata_errors/latest.json",
    }
    assert list(local.rglob("*")) == []
    storage._STORES.clear()  # the API server's own process
    reports = console.health_reports()
    assert [(r["kafka_config_id"], r["counts"]["offline"]) for r in reports] == [("kafka_b", 2)]


def test_a_rolls_state_is_in_the_bucket_for_the_next_poke_on_any_worker(s3proxy, s3_env):
    from kafka_runbooks import console
    from kafka_runbooks_airflow.run_state import (
        read_roll_state,
        roll_state_file,
        write_roll_state,
    )

    prefix, local = s3_env
    state = {"order": [1, 2], "nodes": {"1": {"phase": "done"}, "2": {"phase": "restarting"}}}
    write_roll_state("kafka_broker_restart", "manual__2026-11-23T20:00:00+00:00", json.dumps(state))
    assert _objects(s3proxy, prefix) == [
        "restart/kafka_broker_restart/manual__2026-11-23T20_00_00_00_00/roll-state.json"
    ]
    assert list(local.rglob("*")) == []
    storage._STORES.clear()  # another worker
    run_id = "manual__2026-11-23T20:00:00+00:00"
    assert json.loads(read_roll_state("kafka_broker_restart", run_id)) == state
    assert str(roll_state_file("kafka_broker_restart", run_id)).startswith("s3://")
    progress = console.run_progress("kafka_broker_restart", run_id)
    assert progress["line"] == "1 of 2 node(s) done | node 2: restarting"


def test_swap_reads_the_etag_and_compares_before_it_writes(s3proxy, s3_env):
    """The S3 compare-and-set's own steps (GET with its ETag, compare, PUT If-Match, DELETE
    If-Match) on the real server. S3Proxy does not enforce If-Match, so the store is told it
    does here: this checks what the client does, the probe above checks the server."""
    s3 = storage.store()
    s3._conditional = True
    s3.write_text("state/leases/kafka_a.json", "held by r1")
    body, etag = s3._read_with_etag("state/leases/kafka_a.json")
    assert body == b"held by r1" and etag.startswith('"')
    assert s3.swap("state/leases/kafka_a.json", "held by someone else", "held by r2") is False
    assert s3.read_text("state/leases/kafka_a.json") == "held by r1"
    assert s3.swap("state/leases/kafka_a.json", "held by r1", "held by r2") is True
    assert s3.read_text("state/leases/kafka_a.json") == "held by r2"
    assert s3.swap("state/leases/kafka_a.json", "held by r2", None) is True
    assert not s3.exists("state/leases/kafka_a.json")
    assert s3.swap("state/leases/kafka_a.json", "held by r2", "again") is False
    assert (
        s3.create("state/leases/kafka_b.json", "new") and s3.read_text("state/leases/kafka_b.json") == "new"
    )
