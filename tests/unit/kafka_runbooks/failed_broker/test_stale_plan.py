"""A planned operation's plan gone stale between its gate and its execution (issue #27): the rule that
tells, over the real plan objects (a plan folder in the planner's format read by
``chunks_from_plan_dir``, the cluster's ``PartitionState``). The executor refusing on it, before any
submission, is tests/integration/test_rebalance_stop_and_stale_plan.py's (real stack)."""

from __future__ import annotations

import json

from kafka_runbooks.failed_broker.execute import ExecState, chunks_from_plan_dir, stale_moves
from kafka_runbooks.model import PartitionState


def _plan(folder, moves):
    """summary.json with each move's from/to and one chunk file, as the planner writes them."""
    (folder / "chunks").mkdir(parents=True)
    body = {
        "version": 1,
        "partitions": [{"topic": "t", "partition": p, "replicas": to} for p, _, to in moves],
    }
    (folder / "chunks" / "0001.json").write_text(json.dumps(body))
    summary = {
        "chunks": [{"index": 1, "file": "chunks/0001.json", "partitions": len(moves), "bytes": 0}],
        "moves": [{"topic": "t", "partition": p, "from": was, "to": to, "bytes": 0} for p, was, to in moves],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _now(**replicas):
    return {
        f"t:{p[1:]}": PartitionState("t", int(p[1:]), r[0], 1, tuple(r), tuple(r))
        for p, r in replicas.items()
    }


def test_the_planned_from_is_kept_and_survives_the_state_file(tmp_path):
    (chunk,) = chunks_from_plan_dir(_plan(tmp_path / "plan", [(0, [1, 2], [3, 2]), (1, [2, 3], [2, 4])]))
    assert chunk.planned_from == {"t:0": [1, 2], "t:1": [2, 3]}
    state = ExecState("r", [1, 2, 3, 4], 1, [chunk], drain=True)
    assert ExecState.from_json(state.to_json()).chunks[0].planned_from == chunk.planned_from


def test_a_partition_changed_by_someone_else_is_stale_and_named(tmp_path):
    (chunk,) = chunks_from_plan_dir(_plan(tmp_path / "plan", [(0, [1, 2], [3, 2]), (1, [2, 3], [2, 4])]))
    stale = stale_moves(chunk, _now(p0=[1, 4], p1=[2, 3]), {})
    assert stale == {"t:0": "replicas now [1, 4], the approved plan moves them from [1, 2] to [3, 2]"}


def test_as_planned_done_in_flight_or_lagging_metadata_is_not_stale(tmp_path):
    """The states a resumed run meets on its own plan: untouched (any order: a reorder moves no data),
    on the target, in flight to the target, and the target plus the old replica (the controller
    finished a moment ago; this broker's metadata still lists it)."""
    (chunk,) = chunks_from_plan_dir(_plan(tmp_path / "plan", [(0, [1, 2], [3, 2]), (1, [2, 3], [2, 4])]))
    assert stale_moves(chunk, _now(p0=[2, 1], p1=[2, 4]), {}) == {}
    assert stale_moves(chunk, _now(p0=[3, 2, 1], p1=[2, 3]), {}) == {}
    in_flight = {"t:0": {"replicas": [3, 2, 1], "adding": [3], "removing": [1]}}
    assert stale_moves(chunk, _now(p0=[3, 2, 1], p1=[2, 3]), in_flight) == {}
    # gone partitions are the executor's skip, not a refusal; a state without planned origins is not judged
    assert stale_moves(chunk, _now(p1=[2, 3]), {}) == {}
    chunk.planned_from = {}
    assert stale_moves(chunk, _now(p0=[1, 4], p1=[2, 3]), {}) == {}
