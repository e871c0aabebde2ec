"""Estimates that say how they were made and where they cannot hold (issue #39 point 6): at a
1 KiB/s throttle the gate said "about 14 min 52 s", the copy ran at 60.5 KiB/s and ended in ~100 s,
and the progress line at the start read "all 0 chunk(s) done | 100% bytes (0 B of 0 B)"."""

from __future__ import annotations

from dataclasses import replace

from kafka_runbooks.failed_broker.progress import Progress
from kafka_runbooks.failed_broker.report import plan_markdown
from kafka_runbooks.failed_broker.throttle_floor import FLOOR_KEYS, floor_from
from tests.unit.kafka_runbooks.failed_broker.test_report import SUMMARY

DEFAULTS = dict(zip(FLOOR_KEYS, ("1048576", "11", "1"), strict=True))


def test_the_floor_is_read_from_the_receivers_and_unknown_stays_unknown():
    floor = floor_from({1: DEFAULTS, 2: {**DEFAULTS, "replica.fetch.max.bytes": "524288"}, 3: {}})
    assert (floor.fetch_max_bytes, floor.window_s, floor.brokers) == (524288, 11.0, (1, 2))
    assert round(floor.bytes_per_sec) == 47663
    assert floor_from({1: {}, 2: {"replica.fetch.max.bytes": None}}) is None
    assert floor.warning(10 * 1024**2) is None


def test_a_throttle_below_what_kafka_holds_is_said_at_the_gate_with_the_rate_kafka_allows():
    floor = floor_from({b: DEFAULTS for b in (1, 2, 3)}).as_dict()
    text = plan_markdown(SUMMARY, 1024, "/p", True, (), floor)
    row = next(line for line in text.splitlines() if line.startswith("| Throttle |"))
    assert "1.0 KiB/s per broker: **below what Kafka holds" in row and "up to about 93.1 KiB/s" in row
    assert "| Longest duration at the throttle |" in text and "Estimated duration" not in text
    held = plan_markdown(SUMMARY, 50 * 1024**2, "/p", True, (), floor)
    assert "below what Kafka holds" not in held and "| Estimated duration at the throttle | about" in held
    unknown = plan_markdown(SUMMARY, 1024, "/p", True, (), None)
    assert "below what Kafka holds" not in unknown, "nothing said that was not read"


def _progress(**kw) -> Progress:
    base = Progress(1, 3, 1, 9, 10, 100, None, None, 40.0, 1024, 0, receivers=2)
    return replace(base, **kw)


def test_the_progress_line_says_when_the_measured_rate_is_off_the_gates_assumption():
    fast = _progress(rate_bytes_per_sec=60.5 * 1024, eta_s=10).line()
    assert "30.2x the throttle on 2 receiver(s): Kafka does not hold a throttle this low" in fast
    assert "the throttle" not in _progress(rate_bytes_per_sec=1500, eta_s=10).line().split("|")[-1]
    slow = _progress(rate_bytes_per_sec=100, eta_s=900).line()
    assert "slower than the throttle: slower than the gate's time" in slow
    assert "slower than the throttle" not in _progress(rate_bytes_per_sec=100, eta_s=9, elapsed_s=5).line()
    silent = _progress(
        rate_bytes_per_sec=100, eta_s=900, silent="receiver(s) not answering: broker 3 silent 40 s"
    )
    assert silent.line().endswith("broker 3 silent 40 s"), "the silent receiver is the reason, said once"


def test_no_chunk_is_not_all_chunks_done():
    empty = _progress(chunk=0, chunks=0, partitions=0, partitions_done=0, bytes=0, bytes_done=0)
    assert replace(empty, finished=True).line() == "nothing to move"
    assert empty.line() == "no chunk yet"
