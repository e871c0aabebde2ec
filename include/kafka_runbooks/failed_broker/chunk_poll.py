"""Polling a moving chunk: verified when every partition has its target replicas, all of them in
the ISR, and no reassignment in flight; its progress (bytes copied, rate, time left) said on the way.

The bytes still being copied are read from the receivers' DescribeLogDirs sizes; the progress line
and progress.json (for the UI page) come from ``failed_broker.progress``. The run's throttle comes
off when the last moving chunk is verified.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kafka_runbooks.evidence.clock import Stamp
from kafka_runbooks.evidence.silence import Silence
from kafka_runbooks.failed_broker import progress
from kafka_runbooks.failed_broker.chunk_state import (
    DONE,
    MOVING,
    ChunkState,
    ChunkWork,
    ExecState,
    ReassignError,
    key,
)
from kafka_runbooks.failed_broker.chunk_throttle import ChunkThrottle


class ChunkPoll(ChunkWork):
    """Checks one moving chunk (``poll``) and says the run's progress at most every
    ``progress_every_s`` while it waits; the throttle is set again or taken off through ``throttles``."""

    def __init__(
        self,
        throttles: ChunkThrottle,
        progress_every_s: float = 10.0,
        progress_file: Path | None = None,
        **work: Any,
    ) -> None:
        super().__init__(**work)
        self.throttles = throttles
        self.progress_file = progress_file  # progress.json for the UI page; None: log only
        self.progress_every_s = progress_every_s
        self._last_progress = 0.0

    def poll(self, state: ExecState, chunk: ChunkState) -> tuple[set[int], list[str]]:
        """Check one moving chunk; (live brokers, its partitions not yet in place). Verified: done,
        and the throttle comes off when no other chunk of the run still moves."""
        live, partitions, inflight = self._cluster(chunk.moving)
        subject = f"chunk {chunk.index}"
        if state.throttle is None and any(k in inflight for k in chunk.moving):
            # cleaned up after a kill while the copy went on: throttle it again
            self.throttles.set_throttle(state, chunk, live)
        done, waiting = [], []
        for k in chunk.moving:
            if k in chunk.cancelled:  # given up on (a silent receiver): its cancel is under way
                continue
            target = set(chunk.targets[k])
            p = partitions.get(k)
            if k in inflight:
                waiting.append(k)
            elif p is None:
                chunk.skipped[k] = "the topic was deleted while it moved"
                done.append(k)
            elif set(p.replicas) != target and target < set(p.replicas):
                waiting.append(k)  # done at the controller; this broker's metadata not yet updated
            elif set(p.replicas) != target:
                raise ReassignError(
                    f"the reassignment of {k} ended with replicas {list(p.replicas)}, not the plan's "
                    f"{chunk.targets[k]} (cancelled by someone else?)"
                )
            elif set(p.isr) != target:
                waiting.append(k)  # replicas in place, the ISR not yet full
            else:
                done.append(k)
        if all(c.status == DONE for c in state.chunks[: state.chunks.index(chunk)]):
            self._progress(state, chunk, done, waiting, live)  # the earliest moving chunk speaks for the run
        if waiting:
            return live, waiting
        self._record(
            "chunk verified",
            "every partition of the chunk has its target replicas, all in the ISR, no reassignment in flight",
            subject=subject,
            observed={"partitions": len(done)},
        )
        if not any(c.status == MOVING and c is not chunk for c in state.chunks):
            left = self.throttles.remove_throttle(state, live)
            if left:
                raise ReassignError(f"the throttle could not be removed from {left}")
        chunk.status = DONE
        chunk.finished_ms = int(self.clock() * 1000)
        self.checkpoint(state)
        return live, []

    def _progress(self, state, chunk, done, waiting, live) -> None:
        now = self.clock()
        if waiting and now - self._last_progress < self.progress_every_s:
            return
        self._last_progress = now
        total = sum(chunk.bytes.get(k, 0) for k in chunk.moving)
        copied = sum(chunk.bytes.get(k, 0) for k in done)
        silent = {int(b) for b in state.silent}  # a silent receiver's log dirs cannot be asked
        receivers = sorted(
            {
                b
                for k in waiting
                for b in chunk.targets[k]
                if b not in chunk.origin.get(k, []) and b in live and b not in silent
            }
        )
        if waiting and receivers:
            sizes, _ = self.admin.describe_log_dirs(receivers)
            got = {(r.broker_id, key(r.topic, r.partition)): r.size_bytes for r in sizes}
            for k in waiting:
                adding = [b for b in chunk.targets[k] if b not in chunk.origin.get(k, [])]
                copied += min(chunk.bytes.get(k, 0), min((got.get((b, k), 0) for b in adding), default=0))
        if chunk.copied_at_start is None:  # adopted after a kill: its bytes were copied before
            chunk.copied_at_start = copied
            chunk.adopted = True
            chunk.started_ms = int(now * 1000)
            self.checkpoint(state)
        figures = dataclasses.replace(
            progress.measure(state, chunk, done, copied, now), silent=self._silence_note(state)
        )
        progress.write(self.progress_file, figures)
        self._record(
            "progress",
            figures.line(),
            subject=f"chunk {chunk.index}",
            observed={
                **{k: v for k, v in figures.as_dict().items() if k != "line"},
                "chunk_partitions_done": len(done),
                "chunk_partitions": len(chunk.moving),
                "chunk_bytes_done": copied,
                "chunk_bytes": total,
                "waiting": waiting[:20],
            },
        )

    def _silence_note(self, state: ExecState) -> str | None:
        """The receivers the last step found silent, and for how long (this process's clock), for the
        progress line: a chunk waiting on a dead receiver says so instead of "0 % bytes" alone."""
        if not state.silent:
            return None
        now = Stamp(int(self.clock() * 1000), self.clock_name)
        parts = []
        for broker, raw in sorted(state.silent.items()):
            age = Silence.from_dict(int(broker), raw).age_ms(now)
            parts.append(f"broker {broker} silent {'?' if age is None else f'{age / 1000:.0f} s'}")
        return "receiver(s) not answering: " + ", ".join(parts)
