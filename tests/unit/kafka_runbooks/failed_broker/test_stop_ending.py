"""How a stop ends, from what the cluster says after it (issue #24 item 2): a chunk that finished
before the stop is done, not 'stopped'; only partitions on their target count as moved; the
progress never claims a chunk count or bytes the cluster contradicts; leadership is stated."""

from __future__ import annotations

from kafka_runbooks.failed_broker.execute import DONE, PENDING, ChunkState, ExecState
from kafka_runbooks.failed_broker.stop import STOPPED, ending, final_progress, moved, settle


def _chunk(index: int, status: str, keys: list[str]) -> ChunkState:
    return ChunkState(
        index=index,
        targets={k: [1, 2] for k in keys},
        bytes={k: 100 for k in keys},
        status=status,
        moving=list(keys) if status != PENDING else [],
        origin={k: [1, 4] for k in keys},
    )


def _state(chunks: list[ChunkState]) -> ExecState:
    state = ExecState(run_id="r", failed_brokers=[4], throttle_bytes_per_sec=1, chunks=chunks)
    state.stopped = "stopped by alice: why"
    return state


def test_a_chunk_the_cluster_shows_finished_is_done_not_stopped():
    """The incident: the stop came after the last chunk had finished; the page said '9 of 10 chunks,
    91 %' while no partition named the dead broker any more."""
    chunks = [_chunk(i, DONE, [f"t:{i}"]) for i in range(9)] + [_chunk(9, STOPPED, ["t:9"])]
    state = _state(chunks)
    settle(state, {"t:9": [2, 1]}, cancelled=set())  # nothing was in flight to cancel: it had finished
    figures = final_progress(state, 0.0)
    assert state.chunks[9].status == DONE
    assert (figures.chunk, figures.chunks, figures.percent_bytes, figures.cancelled) == (10, 10, 100.0, 0)
    assert ending(state).cancelled == [] and len(ending(state).completed) == 10


def test_only_partitions_on_their_target_count_as_moved():
    state = _state(
        [
            _chunk(0, DONE, ["a:0"]),
            _chunk(1, STOPPED, ["b:0", "b:1", "b:2", "b:3"]),
            _chunk(2, PENDING, ["c:0"]),
        ]
    )
    replicas = {
        "b:0": [1, 2],  # finished before the cancel reached it
        "b:1": [1, 4],  # cancelled: back on its replicas before the move
        "b:3": [1, 2, 4],  # finished at the controller, this broker's metadata still names broker 4
    }  # b:2 was not read: unknown is not 'moved'
    settle(state, replicas, cancelled={"b:1"})
    assert state.chunks[1].status == STOPPED and state.chunks[1].completed == ["b:0", "b:3"]
    assert moved(state) == ["a:0", "b:0", "b:3"]
    end = ending(state)
    assert (end.chunks_done, end.cancelled, end.not_started) == (1, ["b:1", "b:2"], ["c:0"])
    figures = final_progress(state, 0.0)
    assert (figures.partitions_done, figures.bytes_done, figures.cancelled, figures.not_started) == (
        3,
        300,
        2,
        1,
    )
    assert "1 of 3 chunk(s) done, 2 partition move(s) cancelled, 1 never started" in figures.line()


def test_a_cancelled_move_whose_replicas_read_as_the_target_still_counts_as_cancelled():
    """This stop's cancel was accepted for it: the controller puts it back, whatever a lagging read says."""
    state = _state([_chunk(0, STOPPED, ["b:0"])])
    settle(state, {"b:0": [1, 2]}, cancelled={"b:0"})
    assert state.chunks[0].status == STOPPED and ending(state).cancelled == ["b:0"]


def test_the_ending_says_whether_leadership_was_rebalanced():
    state = _state([_chunk(0, DONE, ["a:0"]), _chunk(1, STOPPED, ["b:0"])])
    settle(state, {"b:0": [1, 4]}, cancelled={"b:0"})
    assert "leaders NOT re-balanced yet" in ending(state).line()
    assert "leaders NOT re-balanced yet" in final_progress(state, 0.0).line()
    state.leaders = "leaders re-balanced: the 1 moved partition(s) are led by their preferred replica"
    assert ending(state).line().endswith(state.leaders)
    nothing = _state([_chunk(0, STOPPED, ["b:0"])])
    settle(nothing, {"b:0": [1, 4]}, cancelled={"b:0"})
    assert "nothing moved, no election needed" in ending(nothing).line()
