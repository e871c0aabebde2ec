"""Claims and fenced writes (kafka_runbooks.fence) on a local data store: the latest claimant writes."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from kafka_runbooks.fence import Superseded, claim, fence_of, write_fenced
from kafka_runbooks.storage import Store

KEY = "restart/dag/run/roll-state.json"


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path))
    s.write_text(KEY, json.dumps({"order": [1, 2], "phase": "planned"}))
    return s


def test_a_claim_bumps_the_fence_and_names_the_claimant(store):
    text, fence = claim(store, KEY, "run try 1")
    assert fence == 1 and fence_of(store.read_text(KEY)) == 1
    assert json.loads(text)["claimed_by"] == "run try 1" and json.loads(text)["order"] == [1, 2]
    assert claim(store, KEY, "run try 2")[1] == 2


def test_the_latest_claimant_writes_and_an_earlier_one_is_superseded(store):
    _, first = claim(store, KEY, "try 1")
    write_fenced(store, KEY, first, json.dumps({"order": [1, 2], "phase": "restarting 1"}))
    assert json.loads(store.read_text(KEY))["phase"] == "restarting 1"
    _, second = claim(store, KEY, "try 2")
    with pytest.raises(Superseded, match="try 2 claimed this run's state after this process"):
        write_fenced(store, KEY, first, json.dumps({"order": [1, 2], "phase": "restarting 2"}))
    assert json.loads(store.read_text(KEY))["phase"] == "restarting 1"  # nothing of the stale write
    write_fenced(store, KEY, second, json.dumps({"order": [1, 2], "phase": "restarting 2"}))
    on_disk = json.loads(store.read_text(KEY))
    assert (
        on_disk["phase"] == "restarting 2" and on_disk["fence"] == second and on_disk["claimed_by"] == "try 2"
    )


def test_a_halted_process_writes_nothing_even_holding_the_latest_claim(store):
    before = store.read_text(KEY)
    _, fence = claim(store, KEY, "try 1")
    claimed = store.read_text(KEY)
    with pytest.raises(Superseded, match="killed"):
        write_fenced(store, KEY, fence, before, halted=lambda: "this task was killed")
    assert store.read_text(KEY) == claimed


def test_a_state_rewritten_by_a_new_plan_supersedes_every_claim(store):
    """A whole run cleared: the plan task writes a fresh state (fence 0) while an old poke runs."""
    _, fence = claim(store, KEY, "try 1")
    store.write_text(KEY, json.dumps({"order": [2, 1]}))
    with pytest.raises(Superseded):
        write_fenced(store, KEY, fence, json.dumps({"order": [1, 2]}))


def _claim_many(root: str, barrier, out, n: int) -> None:
    s = Store(root)
    barrier.wait()
    out.put(sorted(claim(s, KEY, f"p{n}-{i}")[1] for i in range(10)))


def test_racing_claims_each_get_their_own_fence(tmp_path, store):
    """Four processes claim 10 times each at once: 40 distinct fences, none lost to a race."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim_many, args=(str(tmp_path), barrier, out, n)) for n in range(4)]
    for p in procs:
        p.start()
    fences = [f for _ in procs for f in out.get(timeout=120)]
    for p in procs:
        p.join(60)
    assert sorted(fences) == list(range(1, 41))
    assert fence_of(store.read_text(KEY)) == 40
