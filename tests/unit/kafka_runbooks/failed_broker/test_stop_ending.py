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


def test_a_cancel_that_restored_the_set_in_another_order_is_put_back_in_order():
    """Kafka 4.3.1's cancel restores the replica SET, not its order ([1, 2] moving to [2, 3] comes back
    as [2, 1]: broker 2 then preferred); only such a partition is reordered, nothing is guessed."""
    from kafka_runbooks.failed_broker.stop import cancelled, order_check

    origins = {"a:0": [1, 2], "a:1": [4, 2], "a:2": [3, 4], "a:3": [1, 4], "a:4": [1, 4], "a:5": [1, 2]}
    replicas = {"a:0": [2, 1], "a:1": [2, 4], "a:2": [3, 4], "a:3": [1, 2], "a:4": [1, 2, 4], "a:6": [5, 6]}
    origins["a:7"] = [1, 2]
    keys = [*origins, "a:6"]  # a:5's topic is gone; a:6's origin never recorded; a:7 someone else's
    check = order_check(keys, origins, replicas, inflight={"a:4", "a:7"}, retargeted={"a:7"})
    assert check.reorder == {"a:0": [1, 2], "a:1": [4, 2]}
    assert check.in_order == ["a:2"]
    assert check.set_differs == {"a:3": [1, 2]}, "not the origin's replicas: left as the cancel left it"
    assert check.origin_unknown == ["a:6"], "an unknown origin stays unknown"
    assert check.unknown == ["a:4"], "still in flight: its cancel is not confirmed, not judged"
    assert (check.gone, check.left_alone) == (["a:5"], ["a:7"])
    assert not check.settled
    assert order_check(["a:0"], origins, replicas, inflight=set()).settled
    state = _state([_chunk(0, STOPPED, ["b:0", "b:1"]), _chunk(1, DONE, ["c:0"])])
    settle(state, {"b:0": [1, 2], "b:1": [4, 1]}, cancelled={"b:1"})
    assert cancelled(state) == ["b:1"] == ending(state).cancelled


def test_an_adopted_moves_order_is_known_only_as_this_run_recorded_it():
    """A move adopted in flight shows its replicas target first ([1, 2, 4] for [4, 2] -> [1, 2]):
    without the order this run recorded before it submitted, the origin is a set, and a stop must not
    'restore' that guessed order (it would vouch for the preferred leader the cancel changed)."""
    from kafka_runbooks.failed_broker.execute import adopted_origin
    from kafka_runbooks.failed_broker.stop import known_origins

    inflight = {"replicas": [1, 2, 4], "adding": [1], "removing": [4]}
    unknown: list[str] = []
    assert adopted_origin("a:1", inflight, {"a:1": [4, 2]}, unknown) == [4, 2] and unknown == []
    assert adopted_origin("a:2", inflight, {}, unknown) == [2, 4] and unknown == ["a:2"]
    chunk = _chunk(0, STOPPED, ["a:1", "a:2"])
    chunk.origin, chunk.origin_order_unknown = {"a:1": [4, 2], "a:2": [2, 4]}, unknown
    assert known_origins(_state([chunk])) == {"a:1": [4, 2]}
