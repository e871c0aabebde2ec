"""The stop request and which states a stop acts on (the cluster part: tests/integration/test_reassignment_stop.py)."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker import progress
from kafka_runbooks.failed_broker.execute import MOVING, ChunkExecutor, ChunkState, ExecState, ReassignStopped
from kafka_runbooks.failed_broker.stop import (
    STOPPED,
    StopRequest,
    acknowledge,
    read_request,
    request_path,
    to_stop,
    write_request,
)


def _state(status: str, throttle=None, finished=False, stop_request=None) -> ExecState:
    chunk = ChunkState(
        index=1, targets={"t:0": [1, 2]}, status=status, moving=["t:0"] if status != "pending" else []
    )
    return ExecState(
        run_id="r",
        failed_brokers=[4],
        throttle_bytes_per_sec=1,
        chunks=[chunk],
        throttle=throttle,
        finished=finished,
        stop_request=stop_request,
    )


def test_a_request_applies_to_its_connection_and_to_runs_started_before_it(tmp_path):
    path = request_path(tmp_path, "kafka/prod")
    assert str(path.parent) == str(tmp_path / "stop") and "/" not in path.name
    write_request(path, StopRequest("kafka/prod", "alice", "why", requested_at_ms=2000, request_id="s1"))
    request = read_request(path)
    assert request.text == "stopped by alice: why"
    assert request.applies_to("kafka/prod", 1000) and request.applies_to("kafka/prod", None)
    assert not request.applies_to("kafka/prod", 3000), "an old request never stops a run started after it"
    assert not request.applies_to("kafka_other", 1000)
    acknowledge(path, "run-1", 2500)
    assert read_request(path).acknowledged == {"run-1": 2500}
    path.write_text("{not json")
    assert read_request(path) is None


def test_what_a_stop_acts_on():
    inflight = {"t:0": {"replicas": [1, 2, 4], "adding": [2], "removing": [4]}}
    states = {
        "moving": _state(MOVING),
        "throttle-only": _state("done", throttle={"brokers": {}}),
        "pending": _state("pending"),
        "finished": _state(MOVING, finished=True),
        "stopped-still-in-flight": _state(STOPPED, stop_request={"request_id": "old"}),
    }
    assert sorted(to_stop(states, inflight, "s1")) == ["moving", "stopped-still-in-flight", "throttle-only"]
    # stopped by this request: read back again even with nothing in flight
    assert list(to_stop({"mine": _state(STOPPED, stop_request={"request_id": "s1"})}, {}, "s1")) == ["mine"]
    assert to_stop({"old": _state(STOPPED, stop_request={"request_id": "old"})}, {}, "s1") == {}


def test_a_stopped_state_is_final_and_owns_nothing_in_flight():
    state = _state(STOPPED, stop_request={"request_id": "s1"})
    state.stopped = "stopped by alice: why"
    assert state.in_flight_targets() == {}, "a new run must not adopt what was stopped"
    with pytest.raises(ReassignStopped, match="stopped by alice: why; this run does not go on"):
        ChunkExecutor(admin=None).step(state)
    line = progress.finished(state, 0.0).line()
    assert (
        line.startswith("STOPPED (stopped by alice: why): 0 of 1 chunk(s) done")
        and "nothing more moves" in line
    )


def test_the_stop_runbook_waits_for_the_task_that_is_stopping_its_run(tmp_path, monkeypatch):
    """The executing task marks its state stopped first and acknowledges after its read-back
    (seconds later): the stop runbook keeps waiting for that acknowledgement instead of
    reading "nothing in flight" in between (seen in the end-to-end test)."""
    from kafka_runbooks.failed_broker.execute import save_state
    from kafka_runbooks_airflow.failed_broker import wait_for_executing_task
    from kafka_runbooks_airflow.run_state import REASSIGN_DAG_ID, runbook_dir

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    state = _state(STOPPED, stop_request={"request_id": "s1"})
    state.kafka_config_id = "kafka_default"
    (runbook_dir(REASSIGN_DAG_ID) / "run-1").mkdir(parents=True)
    save_state(runbook_dir(REASSIGN_DAG_ID) / "run-1" / "exec-state.json", state)
    path = request_path(runbook_dir(REASSIGN_DAG_ID), "kafka_default")
    request = StopRequest("kafka_default", "alice", "why", 1, request_id="s1")
    write_request(path, request)
    naps = []

    def nap(seconds: float) -> None:  # the task acknowledges while the stop runbook waits
        naps.append(seconds)
        acknowledge(path, "run-1", 5)

    requested = {"request": {**request.__dict__}, "path": str(path)}
    result = wait_for_executing_task(requested, active_runs=lambda: 1, wait_s=60, sleep=nap)
    assert result == {"acknowledged": {"run-1": 5}} and naps == [5.0]
