"""The reassignment's progress line and progress.json: chunk i of N, percent of bytes and
partitions over the whole run, the rate since submission, the time left."""

from __future__ import annotations

import json
import logging

from kafka_runbooks.failed_broker import progress
from kafka_runbooks.failed_broker.execute import ChunkExecutor, ChunkState, ExecState

MIB = 1 << 20


def _state(t0_ms: int) -> ExecState:
    first = ChunkState(
        index=1, targets={"t:0": [1, 2], "t:1": [2, 3]}, bytes={"t:0": 3 * MIB, "t:1": 1 * MIB}
    )
    first.status, first.moving, first.started_ms, first.copied_at_start = "moving", ["t:0", "t:1"], t0_ms, 0
    second = ChunkState(
        index=2, targets={"u:0": [1, 3], "u:1": [3, 1]}, bytes={"u:0": 2 * MIB, "u:1": 2 * MIB}
    )
    return ExecState(run_id="r", failed_brokers=[4], throttle_bytes_per_sec=50 * MIB, chunks=[first, second])


def test_a_chunk_done_between_two_checks_has_the_rate_since_its_submission(tmp_path, caplog):
    """Seen on main: '3596595/3596595 bytes copied in 0s (0 B/s) ... time left unknown'."""
    state = _state(t0_ms=1_000_000)
    executor = ChunkExecutor(None, clock=lambda: 1_004.0, progress_file=tmp_path / "progress.json")
    chunk = state.chunks[0]
    with caplog.at_level(logging.INFO):
        executor.watch._progress(state, chunk, ["t:0", "t:1"], [], {1, 2, 3})  # first check: all done
    line = [r.getMessage() for r in caplog.records if "progress because" in r.getMessage()][-1]
    assert "chunk 1 of 2 | 50% bytes (4.0 MiB of 8.0 MiB) | 50% partitions (2/4)" in line
    assert "1.0 MiB/s since submission" in line and "time left ~4 s" in line  # 4 MiB in 4 s, 4 MiB left
    written = json.loads((tmp_path / "progress.json").read_text())
    assert written["chunk"] == 1 and written["chunks"] == 2 and written["percent_bytes"] == 50.0
    assert written["rate_bytes_per_sec"] == MIB and written["eta_s"] == 4.0 and written["line"] in line


def test_dropped_partitions_count_as_done_and_later_chunks_as_not_started():
    state = _state(t0_ms=0)
    state.chunks[0].status = "done"
    second = state.chunks[1]
    second.status, second.moving, second.skipped = "moving", ["u:1"], {"u:0": "already on its target"}
    second.started_ms, second.copied_at_start = 10_000, 0
    figures = progress.measure(state, second, [], MIB, now=20.0)
    assert (figures.chunk, figures.partitions_done, figures.bytes_done) == (2, 3, 7 * MIB)
    assert figures.rate_bytes_per_sec == MIB / 10 and round(figures.eta_s) == 10
    assert figures.line().startswith("chunk 2 of 2 | 88% bytes")


def test_an_adopted_chunk_measures_from_its_first_check_and_nothing_copied_yet_is_unknown():
    state = _state(t0_ms=0)
    chunk = state.chunks[0]
    chunk.copied_at_start, chunk.adopted = 2 * MIB, True  # copied before this run adopted it
    figures = progress.measure(state, chunk, [], 2 * MIB, now=5.0)
    assert figures.rate_bytes_per_sec is None and "rate unknown" in figures.line()
    assert "time left unknown" in figures.line()
    closing = progress.finished(ExecState("r", [4], 1, [], finished=True), now=1.0)
    assert closing.line() == "nothing to move" and closing.percent_bytes == 100.0


def test_a_chunk_adopted_before_any_byte_was_copied_still_says_since_adopted(tmp_path, caplog):
    """Seen on a loaded machine: a killed run's chunk adopted while its receivers held 0 bytes
    was reported "since submission", a submission this run never made."""
    state = _state(t0_ms=0)
    chunk = state.chunks[0]
    chunk.copied_at_start, chunk.started_ms = None, None  # in flight from a killed run
    executor = ChunkExecutor(
        None, clock=lambda: 10.0, progress_every_s=0, progress_file=tmp_path / "progress.json"
    )
    with caplog.at_level(logging.INFO):
        executor.watch._progress(state, chunk, [], ["t:0", "t:1"], set())  # no receiver live: 0 B copied
    assert (chunk.adopted, chunk.copied_at_start, chunk.started_ms) == (True, 0, 10_000)
    line = [r.getMessage() for r in caplog.records if "progress because" in r.getMessage()][-1]
    assert "since adopted" in line and "since submission" not in line, line
    assert json.loads((tmp_path / "progress.json").read_text())["adopted"] is True
    # the flag survives the state file: a resumed attempt keeps measuring from the adoption
    assert ExecState.from_json(state.to_json()).chunks[0].adopted is True
