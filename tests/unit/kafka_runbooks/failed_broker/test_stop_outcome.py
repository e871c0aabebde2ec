"""What a Stop says, from the record that decides it (issue #39 point 1): its headline and each
state's counts come from the same :class:`Ending`, for every state a stop can meet, and a stop that
came after the last chunk leaves a complete run that finishes (its verification runs)."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from kafka_runbooks.failed_broker.execute import DONE, MOVING, PENDING, ChunkExecutor, ChunkState, ExecState
from kafka_runbooks.failed_broker.stop import STOPPED, ending, stop_headline


def _chunk(index: int, status: str, completed: list[str] | None = None) -> ChunkState:
    key = f"t:{index}"
    moving = [key] if status != PENDING else []
    return ChunkState(
        index=index, targets={key: [1, 2]}, status=status, moving=moving, completed=completed or []
    )


def _state(*chunks: ChunkState, stopped: str | None = "stopped by alice: why") -> ExecState:
    return ExecState(
        run_id="r",
        failed_brokers=[4],
        throttle_bytes_per_sec=1,
        chunks=list(chunks),
        stopped=stopped,
        stop_request={"request_id": "s1"} if stopped else None,
    )


def _result(state: ExecState) -> dict:
    """What the console's stop returns for one state (``failed_broker._stop_state_now``)."""
    end = ending(state)
    return {**asdict(end), "complete": end.complete, "line": end.line()}


STATES = {
    # stopped at chunk 2 of 9: 1 done, 1 cancelled, 7 never started
    "mid-run": (
        _state(_chunk(1, DONE), _chunk(2, STOPPED), *(_chunk(i, PENDING) for i in range(3, 10))),
        False,
    ),
    # the last chunk's moves had all landed when the stop read them back: settled DONE
    "after the last chunk": (_state(*(_chunk(i, DONE) for i in range(1, 4))), True),
    # a stopped chunk half landed: what landed counts as moved, the rest cancelled
    "half landed": (_state(_chunk(1, DONE), _chunk(2, STOPPED, completed=[])), False),
    "before the first move": (_state(*(_chunk(i, PENDING) for i in range(1, 3))), False),
}


@pytest.mark.parametrize("name", sorted(STATES))
def test_the_headline_and_the_counts_are_one_record(name):
    state, complete = STATES[name]
    result = _result(state)
    headline = stop_headline([result])
    line = result["line"]
    done, total = result["chunks_done"], result["chunks"]
    assert f"{done} of {total} chunk(s) done" in line
    assert f"{len(result['not_started'])} never started" in line
    assert result["complete"] is complete
    if complete:
        assert headline.startswith("Nothing to stop") and line.startswith("NOTHING TO STOP")
        assert "never started" in line and " 0 never started" in line and " 0 cancelled" in line
    else:
        assert headline == "Stopped" and line.startswith("STOPPED (")
        assert "nothing to stop" not in (headline + line).lower()


def test_an_adopted_state_already_done_beside_a_stopped_plan_reads_stopped_not_nothing_to_stop():
    """The page once said both 'every chunk was already done: nothing to stop' (the adopted moves)
    and '3 of 9 chunk(s) done; 60 never started' (the plan) under one Stop."""
    adopted = _state(_chunk(1, DONE), stopped=None)
    adopted.finished = True
    plan = STATES["mid-run"][0]
    results = [{**_result(adopted), "finished": True}, _result(plan)]
    assert stop_headline(results) == "Stopped"
    assert results[0]["line"].startswith("NOTHING TO STOP") and "1 of 1 chunk(s) done" in results[0]["line"]
    assert "1 of 9 chunk(s) done" in results[1]["line"] and "7 never started" in results[1]["line"]


def test_an_adopted_state_with_no_moves_beside_a_stopped_plan_says_nothing_of_stopping():
    """Seen in Chromium on the real stack: a run that adopted no moves still has the adopted state,
    with 0 chunks; its line read 'NOTHING TO STOP (stopped): the work was already complete: 0 of 0
    chunk(s) done' above the plan's 'STOPPED (...): 0 of 4 chunk(s) done; ... 47 never started'."""
    adopted = _state(stopped="stopped")
    adopted.finished = True
    results = [{**_result(adopted), "finished": True}, _result(STATES["mid-run"][0])]
    assert results[0]["line"] == "no moves here: none were adopted or planned"
    assert stop_headline(results) == "Stopped"
    assert "nothing to stop" not in " ".join(r["line"] for r in results).lower()


def test_a_stop_handed_to_the_running_task_or_with_no_state_says_so():
    assert stop_headline([{"taken_over": "claimed by run r execute try 2"}]).startswith("Stop handed")
    assert stop_headline([]).startswith("Stopped before the first move")


def test_a_stop_after_the_last_chunk_lets_the_run_finish_complete():
    """A Stop clicked just after the last chunk finished once failed a complete heal as stopped and
    skipped its verification: the executor finishes it and records the late stop."""
    state = STATES["after the last chunk"][0]
    saved = []
    executor = ChunkExecutor(admin=None, checkpoint=saved.append)
    assert executor.step(state) is True
    assert state.finished and state.stopped is None and saved
    assert state.stop_request["after_the_last_chunk"] is True, "the stop stays on record"


def test_a_stop_with_work_left_still_ends_the_run():
    from kafka_runbooks.failed_broker.execute import ReassignStopped

    state = _state(_chunk(1, DONE), _chunk(2, MOVING))
    with pytest.raises(ReassignStopped, match="stopped by alice: why"):
        ChunkExecutor(admin=None).step(state)
