"""The heal's scheduling rule: when the next chunk starts while others still move, and which
brokers a chunk adds replicas to (the cluster part: tests/integration/test_heal_overlap.py)."""

from __future__ import annotations

import json
from collections import Counter

from kafka_runbooks.failed_broker.execute import (
    DONE,
    MOVING,
    PENDING,
    ChunkState,
    ExecState,
    chunks_from_plan_dir,
    next_to_start,
)


def _state(*chunks: tuple[str, list[int]]) -> ExecState:
    """Chunks given as (status, receivers), one partition each."""
    return ExecState(
        run_id="r",
        failed_brokers=[4],
        throttle_bytes_per_sec=1,
        chunks=[
            ChunkState(index=i, targets={f"t:{i}": [1, 2]}, status=status, receivers=receivers)
            for i, (status, receivers) in enumerate(chunks, start=1)
        ],
    )


def test_the_next_chunk_starts_while_one_moves_as_soon_as_one_of_its_receivers_has_room():
    state = _state((MOVING, [1, 2]), (PENDING, [2, 3]), (PENDING, [1]))
    # receiver 3 has nothing coming and receiver 2 one replica: chunk 2 starts, not chunk 3
    assert next_to_start(state, Counter({1: 2, 2: 2}), slots=2, ceiling=5) is state.chunks[1]
    assert next_to_start(state, Counter({1: 2, 2: 1, 3: 2}), slots=2, ceiling=5) is state.chunks[1]


def test_the_next_chunk_waits_while_every_receiver_of_it_is_full():
    state = _state((MOVING, [1, 2]), (PENDING, [2, 3]))
    assert next_to_start(state, Counter({2: 2, 3: 2}), slots=2, ceiling=5) is None


def test_the_next_chunk_waits_while_one_of_its_receivers_is_at_the_ceiling():
    """The busiest receiver sets the pace: more replicas queued on it finish nothing sooner."""
    state = _state((MOVING, [1, 2]), (PENDING, [2, 3]))
    assert next_to_start(state, Counter({2: 5}), slots=2, ceiling=5) is None


def test_chunks_keep_their_order_one_after_another_without_slots_or_known_receivers():
    moving = _state((DONE, [1]), (MOVING, [1, 2]), (PENDING, [3]))
    assert next_to_start(moving, Counter(), slots=0, ceiling=5) is None
    unknown = _state((MOVING, [1, 2]), (PENDING, []))
    assert next_to_start(unknown, Counter(), slots=2, ceiling=5) is None, "unknown receivers never overlap"
    # nothing moves: the first pending chunk starts, whatever the receivers
    idle = _state((DONE, [1]), (PENDING, []), (PENDING, [3]))
    assert next_to_start(idle, Counter(), slots=0, ceiling=5) is idle.chunks[1]
    assert next_to_start(_state((DONE, [1])), Counter(), slots=2, ceiling=5) is None


def _write_plan(folder, moves: list[dict]) -> None:
    (folder / "chunks").mkdir()
    body = {
        "version": 1,
        "partitions": [{"topic": "t", "partition": m["partition"], "replicas": m["to"]} for m in moves],
    }
    (folder / "chunks" / "0001.json").write_text(json.dumps(body))
    summary = {
        "chunks": [{"index": 1, "file": "chunks/0001.json", "partitions": len(moves), "bytes": 0}],
        "moves": [{"topic": "t", "bytes": 10, **m} for m in moves],
    }
    (folder / "summary.json").write_text(json.dumps(summary))


def test_a_chunks_receivers_are_the_brokers_its_moves_add_and_unknown_without_their_origin(tmp_path):
    known = tmp_path / "known"
    known.mkdir()
    _write_plan(
        known,
        [
            {"partition": 0, "from": [4, 1], "to": [2, 1]},
            {"partition": 1, "from": [1, 4, 2], "to": [1, 3, 2]},
        ],
    )
    assert chunks_from_plan_dir(known)[0].receivers == [2, 3]
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    _write_plan(unknown, [{"partition": 0, "from": [4, 1], "to": [2, 1]}, {"partition": 1, "to": [1, 3, 2]}])
    assert chunks_from_plan_dir(unknown)[0].receivers == []
