"""Progress of a reassignment run, the way ``kafka-reassign-partitions --verify``, Strimzi's
KafkaRebalance status and Cruise Control's executor show it: which chunk of how many,
percent of bytes and partitions over the whole run, the copy rate and the time left.

The rate is measured from the chunk's submission (not from the first check): a chunk
that finishes between two checks has still moved its bytes in the time since it was
submitted. The same figures go to the task log (one short line) and to
``progress.json`` in the run's folder, which the Kafka page of the Airflow UI reads.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kafka_runbooks import storage
from kafka_runbooks.storage import StorePath
from kafka_runbooks.units import format_duration, format_size

PROGRESS_FILE = "progress.json"
SLOW_AFTER_S = 30.0  # a chunk's rate is said slow only after this long (its first fetches start up)


@dataclass(frozen=True)
class Progress:
    chunk: int  # position of the chunk being worked on, 1-based
    chunks: int
    partitions_done: int
    partitions: int
    bytes_done: int
    bytes: int
    rate_bytes_per_sec: float | None  # of the current chunk, since its submission
    eta_s: float | None  # for the whole run, at that rate
    elapsed_s: float  # since the chunk's submission
    throttle_bytes_per_sec: int
    updated_at_ms: int
    finished: bool = False
    stopped: str | None = None
    adopted: bool = False  # the chunk was in flight before this run: rate since this run first saw it
    cancelled: int = 0  # partitions whose move a stop cancelled (back on their replicas before the move)
    not_started: int = 0  # partitions of chunks a stop left unstarted
    leaders: str | None = None  # after a stop: whether the moved partitions' leaders were re-balanced
    silent: str | None = None  # receivers with moves waiting that do not answer themselves, and how long
    receivers: int = 0  # of the chunk being worked on: the throttle is per broker, they copy side by side

    @property
    def percent_bytes(self) -> float:
        """Share of the plan's bytes copied so far, in percent; 100 when the plan copies nothing."""
        return 100.0 * self.bytes_done / self.bytes if self.bytes else 100.0

    @property
    def percent_partitions(self) -> float:
        """Share of the planned partitions done, in percent; 100 when none are planned."""
        return 100.0 * self.partitions_done / self.partitions if self.partitions else 100.0

    def line(self) -> str:
        """One short line: 'chunk 3 of 8 | 41% bytes (4.2 GiB of 10.3 GiB) | 37% partitions (38/103) | ...'."""
        head = f"all {self.chunks} chunk(s) done" if self.finished else f"chunk {self.chunk} of {self.chunks}"
        if self.stopped:  # the chunks done stay done; the rest was cancelled or never started
            head = (
                f"STOPPED ({self.stopped}): {self.chunk} of {self.chunks} chunk(s) done, "
                f"{self.cancelled} partition move(s) cancelled, {self.not_started} never started"
            )
        rate = (
            "rate unknown" if self.rate_bytes_per_sec is None else f"{format_size(self.rate_bytes_per_sec)}/s"
        )
        left = (
            "done"
            if self.finished
            else "nothing more moves"
            if self.stopped
            else f"time left {'unknown' if self.eta_s is None else '~' + format_duration(self.eta_s)}"
        )
        if not self.chunks:  # e.g. the adopted moves of an earlier run, when there were none
            return "nothing to move" if self.finished else "no chunk yet"
        tail = f" | {self.leaders}" if self.stopped and self.leaders else ""
        if self.silent and not self.stopped:
            tail += f" | {self.silent}"
        tail += self._against_the_throttle()
        return (
            f"{head} | {self.percent_bytes:.0f}% bytes ({format_size(self.bytes_done)} of {format_size(self.bytes)})"
            f" | {self.percent_partitions:.0f}% partitions ({self.partitions_done}/{self.partitions})"
            f" | {rate} since {'adopted' if self.adopted else 'submission'} | {left}{tail}"
        )

    def _against_the_throttle(self) -> str:
        """The measured rate against what the gate's time assumed (the throttle on each receiver of
        the chunk): said when it is off by half or more, since the gate's time then does not hold;
        not when a silent receiver, already named on the line, is why the chunk is slow."""
        if not self.rate_bytes_per_sec or not self.throttle_bytes_per_sec or not self.receivers:
            return ""
        allowed = self.throttle_bytes_per_sec * self.receivers
        if self.rate_bytes_per_sec > 1.5 * allowed:
            return (
                f" | {self.rate_bytes_per_sec / allowed:.1f}x the throttle on {self.receivers} receiver(s): "
                "Kafka does not hold a throttle this low, the gate's time was the longest"
            )
        slow = self.rate_bytes_per_sec < 0.5 * self.throttle_bytes_per_sec and self.elapsed_s >= SLOW_AFTER_S
        if slow and not self.silent:  # a silent receiver is the reason already said
            return " | slower than the throttle: slower than the gate's time (the time left is from the measured rate)"

        return ""

    def as_dict(self) -> dict[str, Any]:
        """The progress file's content: the figures, the percentages (one decimal) and the log line."""
        return {
            **asdict(self),
            "percent_bytes": round(self.percent_bytes, 1),
            "percent_partitions": round(self.percent_partitions, 1),
            "line": self.line(),
        }


def measure(state, chunk, done: list[str], copied_in_chunk: int, now: float) -> Progress:
    """The run's progress while ``chunk`` is moving (``done``: its partitions fully in place;
    ``copied_in_chunk``: bytes copied so far by its moving partitions, done ones included).

    Partitions a chunk dropped (already in place, deleted) count as done: nothing is left
    to move for them. Chunks after the current one count as not started.
    """
    position = next((i for i, c in enumerate(state.chunks, 1) if c is chunk), len(state.chunks))
    total_bytes = sum(sum(c.bytes.get(k, 0) for k in c.targets) for c in state.chunks)
    total_parts = sum(len(c.targets) for c in state.chunks)
    bytes_done = parts_done = 0
    for c in state.chunks[: position - 1]:
        bytes_done += sum(c.bytes.get(k, 0) for k in c.targets)
        parts_done += len(c.targets)
    skipped = [k for k in chunk.skipped if k in chunk.targets]
    bytes_done += sum(chunk.bytes.get(k, 0) for k in skipped) + copied_in_chunk
    parts_done += len(skipped) + len(done)
    started = (chunk.started_ms or now * 1000) / 1000
    elapsed = max(now - started, 1e-3)
    baseline = chunk.copied_at_start or 0
    rate = (copied_in_chunk - baseline) / elapsed if copied_in_chunk > baseline else None
    left = max(total_bytes - bytes_done, 0)
    eta = left / rate if rate else (0.0 if not left else None)
    return Progress(
        chunk=position,
        chunks=len(state.chunks),
        partitions_done=parts_done,
        partitions=total_parts,
        bytes_done=bytes_done,
        bytes=total_bytes,
        rate_bytes_per_sec=rate,
        eta_s=eta,
        elapsed_s=elapsed,
        throttle_bytes_per_sec=state.throttle_bytes_per_sec,
        updated_at_ms=int(now * 1000),
        adopted=chunk.adopted,
        receivers=len(chunk.receivers),
    )


def finished(state, now: float) -> Progress:
    """Every chunk done (or the run stopped): the closing figures. Only what the state records as in
    place counts: the done chunks, and a stopped chunk's partitions the cluster showed on their
    target after the stop (``completed``, see ``stop.settle``); a cancelled move's copied bytes are
    not progress (the controller drops them)."""
    total_bytes = sum(sum(c.bytes.get(k, 0) for k in c.targets) for c in state.chunks)
    total_parts = sum(len(c.targets) for c in state.chunks)
    done = [c for c in state.chunks if c.status == "done"]
    stopped = [c for c in state.chunks if c.status == "stopped"]
    in_place = [k for c in stopped for k in [*c.completed, *c.skipped] if k in c.targets]
    sizes = {k: c.bytes.get(k, 0) for c in stopped for k in c.targets}
    return Progress(
        chunk=len(done),
        chunks=len(state.chunks),
        partitions_done=sum(len(c.targets) for c in done) + len(in_place),
        partitions=total_parts,
        bytes_done=sum(sum(c.bytes.get(k, 0) for k in c.targets) for c in done)
        + sum(sizes[k] for k in in_place),
        bytes=total_bytes,
        rate_bytes_per_sec=None,
        eta_s=0.0 if state.finished else None,
        elapsed_s=0.0,
        throttle_bytes_per_sec=state.throttle_bytes_per_sec,
        updated_at_ms=int(now * 1000),
        finished=bool(state.finished),
        stopped=state.stopped,
        cancelled=sum(len([k for k in c.moving if k not in c.completed]) for c in stopped),
        not_started=sum(len(c.targets) for c in state.chunks if c.status == "pending"),
        leaders=getattr(state, "leaders", None),
    )


def given_up(state, now: float) -> Progress:
    """The closing figures of a run the executor ended on a decision (``state.gave_up``: a receiver
    silent past its limit): what was done, the moves it cancelled, the chunks never started."""
    figures = finished(state, now)
    return replace(
        figures, stopped=state.gave_up, cancelled=sum(len(c.cancelled) for c in state.chunks), eta_s=None
    )


def write(path: StorePath | Path | None, progress: Progress) -> None:
    """Write ``progress.json`` whole (the UI page reads it, from any machine, while the run goes on)."""
    if path is None:
        return
    storage.locate(path).write_text(json.dumps(progress.as_dict(), sort_keys=True))


def read(path: StorePath | Path) -> dict[str, Any] | None:
    """The progress file as JSON, or None when it is absent or unreadable (no progress known)."""
    try:
        return json.loads(storage.locate(path).read_text())
    except (OSError, ValueError):
        return None
