"""Receivers that stop answering while their moves are in flight: said every poll, then decided on.

A reassignment that adds a replica to a broker completes only once that replica has caught up and
joined the ISR. A receiver that dies mid-chunk (kill -9, a host lost) never catches up: the chunk
would wait under its throttle until the task's timeout, saying nothing (seen on the real stack:
"chunk 1 of 2 | 0 % bytes" four minutes on), and the throttle set on the receiver would outlive
the run. So every step the executor asks each broker with moves of this run in flight to it for
its own answer (:func:`kafka_runbooks.evidence.serving.silent_brokers`), and:

- a silent one is recorded every poll (WARNING: since when, how long, the moves and the bytes
  waiting on it); its spell is kept in the state across pokes, aged on one clock only
  (:mod:`kafka_runbooks.evidence.silence`);
- once it has been silent for longer than the cluster's ``broker.session.timeout.ms`` (read from
  the cluster: the controller has fenced it by then) plus ``SILENT_BOUND_S`` (time for its
  supervisor to bring a crashed process back), the run gives up on it: the run's moves in flight to
  it are cancelled (AlterPartitionReassignments with a null target; recorded first, under the run's
  fence, after Airflow says this try still runs), their replica order is put back as the stop does
  (Kafka's cancel restores the set only), and the run fails naming the receiver, so a new run plans
  on the live brokers. The run's throttle comes off on the way out (the silent broker's once it
  answers again: it stays recorded until then, for the cleanup task and any later run).

The run's other moves go on and a new run adopts them. A state that gave up is final: a cleared
try finishes any cancel still recorded and goes no further.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks import retries
from kafka_runbooks.errors import KafkaRunbookError
from kafka_runbooks.evidence.clock import Stamp
from kafka_runbooks.evidence.serving import silent_brokers
from kafka_runbooks.evidence.settings import SESSION_TIMEOUT, ClusterTimeouts
from kafka_runbooks.evidence.silence import Silence, limit_ms, past_limit, track
from kafka_runbooks.failed_broker.chunk_state import (
    MOVING,
    ChunkState,
    ChunkWork,
    ExecState,
    ReassignError,
    key,
    split,
    target_of,
)
from kafka_runbooks.failed_broker.replica_order import order_check, replicas_of

SILENT_BOUND_S = 60.0  # beyond the session timeout: a supervisor's restart of a crashed broker
ORDER_WAIT_S = 15.0  # how long a cancel may take to read back before its order is judged (as a stop)
LISTED = 20


def _adding(chunk: ChunkState, k: str) -> list[int]:
    """The brokers a move of the chunk adds a replica to."""
    return [b for b in chunk.targets[k] if b not in chunk.origin.get(k, [])]


class ReceiverWatch(ChunkWork):
    """Watches the receivers of the run's moves still waiting (``check``), gives up on one silent past
    its limit, and finishes a cancel a gave-up state still records (``cancel_recorded``)."""

    def __init__(self, bound_s: float = SILENT_BOUND_S, **work: Any) -> None:
        super().__init__(**work)
        self.bound_s = bound_s

    def now(self) -> Stamp:
        """This process's time on its named clock (the spells' one clock)."""
        return Stamp(int(self.clock() * 1000), self.clock_name)

    def check(self, state: ExecState, waiting: dict[int, list[str]]) -> None:
        """After the step's polls (``waiting``: chunk index -> its partitions not yet in place): ask each
        receiver they wait on for its own answer, keep the spells, say each silent one, and give up on
        one past its limit (ReassignError)."""
        receivers = self._receivers(state, waiting)
        silent = silent_brokers(self.admin, receivers) if receivers else {}
        before = {int(b): Silence.from_dict(int(b), e) for b, e in state.silent.items()}
        now = self.now()
        spells = track(before, silent, now)
        for broker, spell in sorted(before.items()):
            if broker not in spells:
                self._record(
                    "a receiver answers again",
                    f"broker {broker} answers itself again after {_seconds(spell.age_ms(now))} of silence: "
                    "its moves go on",
                    subject=f"broker {broker}",
                )
        recorded = {str(b): s.as_dict() for b, s in spells.items()}
        if recorded != state.silent:
            state.silent = recorded
            self.checkpoint(state)
        if not spells:
            return
        timeouts, unread = self._timeouts()
        for broker, spell in spells.items():
            self._record_silent(state, spell, receivers[broker], now, timeouts, unread)
        over = {b: s for b, s in spells.items() if past_limit(s, now, timeouts, self.bound_s)}
        if over:
            self._give_up(state, over, now, timeouts)

    def _receivers(self, state: ExecState, waiting: dict[int, list[str]]) -> dict[int, list[tuple[int, str]]]:
        """Receiver -> the (chunk index, partition) of this run's moves still waiting on it."""
        out: dict[int, list[tuple[int, str]]] = {}
        chunks = {c.index: c for c in state.chunks}
        for index, keys in waiting.items():
            for k in keys:
                for b in _adding(chunks[index], k):
                    out.setdefault(b, []).append((index, k))
        return out

    def _timeouts(self) -> tuple[ClusterTimeouts | None, str | None]:
        """The cluster's timeouts, or (None, why not): an unknown limit is never passed."""
        try:
            return self.admin.cluster_timeouts(), None
        except KafkaRunbookError as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def _limit_text(self, timeouts: ClusterTimeouts | None, unread: str | None) -> str:
        if timeouts is None:
            return (
                f"{SESSION_TIMEOUT} could not be read from the cluster ({unread}): its moves are not given "
                "up on while the limit is unknown"
            )
        return (
            f"past {SESSION_TIMEOUT}={timeouts.broker_session_timeout_ms} ms (the controller fences it then) "
            f"plus {self.bound_s:g} s (for its supervisor to bring a crashed broker back), its moves in "
            "flight are cancelled and the run fails, so a new run plans on the live brokers"
        )

    def _record_silent(self, state, spell: Silence, moves, now: Stamp, timeouts, unread) -> None:
        """The WARNING of one poll that found a receiver silent: since when, how long, what waits."""
        chunks = {c.index: c for c in state.chunks}
        stuck = sum(chunks[i].bytes.get(k, 0) for i, k in moves)
        age = spell.age_ms(now)
        self._record(
            "a receiver does not answer itself",
            f"broker {spell.broker_id}, a receiver of chunk(s) {sorted({i for i, _ in moves})}, has not answered "
            f"a request on its own listener for {_seconds(age)} ({spell.why}); {len(moves)} move(s) of this run "
            f"to it wait, {stuck} bytes planned; " + self._limit_text(timeouts, unread),
            level=logging.WARNING,
            subject=f"broker {spell.broker_id}",
            observed={
                "broker": spell.broker_id,
                "why": spell.why,
                "silent_for_s": None if age is None else round(age / 1000, 1),
                "since": str(spell.since),
                "limit_s": None if timeouts is None else limit_ms(timeouts, self.bound_s) / 1000,
                "bytes_waiting": stuck,
                "moves_waiting": len(moves),
                "partitions": [k for _, k in moves][:LISTED],
            },
        )

    def _give_up(self, state: ExecState, over: dict[int, Silence], now: Stamp, timeouts) -> None:
        """Record the decision and the moves to cancel (first: a resumed run finishes them), cancel
        them, put their order back, and fail the run naming the receivers."""
        inflight = {key(t, p): v for (t, p), v in self.admin.list_reassignments().items()}
        gone = set(over)
        cancel, placed = [], []
        for chunk in [c for c in state.chunks if c.status == MOVING]:
            for k in chunk.moving:
                if k in chunk.cancelled or not gone & set(_adding(chunk, k)):
                    continue
                flight = inflight.get(k)
                if flight is None:
                    placed.append(k)  # on its target already, the silent receiver out of the ISR
                elif target_of(flight) == set(chunk.targets[k]) and gone & set(flight["adding"]):
                    chunk.cancelled[k] = f"receiver(s) {sorted(gone & set(flight['adding']))} silent"
                    cancel.append(k)
        state.gave_up = _ending(over, now, timeouts, self.bound_s, len(cancel))
        self.checkpoint(state)
        self._record(
            "give up on the silent receiver",
            f"{state.gave_up}. Only the moves to it are cancelled (the controller puts their replicas back); "
            "the run's other moves go on and a new run adopts them",
            level=logging.ERROR,
            subject=f"broker(s) {sorted(over)}",
            observed={
                "silent": {
                    b: {**s.as_dict(), "silent_for_s": _seconds(s.age_ms(now))} for b, s in over.items()
                },
                "cancel": cancel[: LISTED * 5],
                "on_target_not_in_sync": placed[: LISTED * 5],
            },
            action=f"AlterPartitionReassignments with a null target for {len(cancel)} partition(s)",
        )
        self.cancel_recorded(state)
        raise ReassignError(state.gave_up)

    def cancel_recorded(self, state: ExecState) -> None:
        """Cancel the moves the state records as to cancel and still sees as moving (idempotent: a
        resumed try sends only what is still in flight to the run's target), put their replica order
        back, and drop the confirmed ones from ``moving``."""
        todo = {k: c for c in state.chunks for k in c.cancelled if k in c.moving}
        if not todo:
            return
        inflight = {key(t, p): v for (t, p), v in self.admin.list_reassignments().items()}
        send = sorted(
            k for k, c in todo.items() if k in inflight and target_of(inflight[k]) == set(c.targets[k])
        )
        errors: dict[str, str] = {}
        if send:
            first = todo[send[0]]
            self.checkpoint(state)  # still ours? a superseded process cancels nothing
            self._require_running(f"AlterPartitionReassignments cancel of {len(send)} partition(s)", first)
            answer = self.admin.alter_partition_reassignments({split(k): None for k in send})
            errors = {key(*tp): e for tp, e in answer.items() if e and e != "NoReassignmentInProgressError"}
        done = [k for k in todo if k not in errors]
        self._record(
            "cancel the moves to the silent receiver",
            f"{len(send)} move(s) in flight cancelled, {len(todo) - len(send)} no longer in flight",
            level=logging.WARNING if not errors else logging.ERROR,
            observed={"cancelled": send[: LISTED * 5], "errors": errors},
        )
        self._restore_order(state, {k: todo[k] for k in done})
        for k in done:
            todo[k].moving.remove(k)
        self.checkpoint(state)

    def _restore_order(self, state: ExecState, cancelled: dict[str, ChunkState]) -> None:
        """Each cancelled partition back in its replica order before the move, the way the stop does it
        (:func:`kafka_runbooks.failed_broker.replica_order.order_check`): Kafka's cancel restores the set only,
        and the first replica is the preferred leader. An order not known is never guessed."""
        keys = sorted(cancelled)
        if not keys:
            return
        origins = {k: list(c.origin[k]) for k, c in cancelled.items() if k in c.origin}
        origins = {k: v for k, v in origins.items() if k not in cancelled[k].origin_order_unknown}
        targets = {k: set(c.targets[k]) for k, c in cancelled.items()}

        def read():
            """One read of the cancelled partitions' replicas and of who moves them now."""
            inflight = {key(t, p): v for (t, p), v in self.admin.list_reassignments().items()}
            theirs = {k for k in keys if k in inflight and target_of(inflight[k]) != targets[k]}
            return order_check(keys, origins, replicas_of(self.admin, keys), set(inflight), theirs)

        check, _ = retries.poll_until(read, lambda c: c.settled, timeout_s=ORDER_WAIT_S, interval_s=1.0)
        errors: dict[str, str] = {}
        if check.reorder:
            first = cancelled[next(iter(check.reorder))]
            self.checkpoint(state)  # still ours? a superseded process reorders nothing
            self._require_running(f"reorder the replicas of {len(check.reorder)} partition(s)", first)
            answer = self.admin.reorder_replicas({split(k): v for k, v in check.reorder.items()})
            errors = {key(*tp): e for tp, e in answer.items() if e}
        self._record(
            f"restored replica order of {len(check.reorder) - len(errors)} partition(s)"
            if check.reorder
            else "no replica order to restore",
            "Kafka's cancel restores the replica set, not its order: a reorder-only reassignment (no data "
            "copied) puts the order before the move back; what is not on its origin's replicas, whose order "
            "is unknown or whose cancel is not confirmed is left as the cancel left it and named here",
            level=logging.WARNING if errors or check.set_differs or check.unknown else logging.INFO,
            observed={
                "restored": dict(list(check.reorder.items())[: LISTED * 5]),
                "errors": errors,
                "already_in_order": len(check.in_order),
                "not_on_origin_replicas_left_as_is": dict(list(check.set_differs.items())[:LISTED]),
                "origin_unknown": check.origin_unknown[:LISTED],
                "cancel_not_confirmed_still_in_flight": check.unknown[:LISTED],
            },
        )


def _seconds(ms: int | None) -> str:
    return "an unknown time" if ms is None else f"{ms / 1000:.0f} s"


def _ending(over: dict[int, Silence], now: Stamp, timeouts: ClusterTimeouts, bound_s: float, n: int) -> str:
    """The run's end in one sentence: which receivers, how long, the limit, what was cancelled."""
    who = ", ".join(f"broker {b} for {_seconds(s.age_ms(now))} ({s.why})" for b, s in sorted(over.items()))
    return (
        f"receiver(s) {sorted(over)} stopped answering themselves while this run's moves to them were in "
        f"flight: {who}, longer than {SESSION_TIMEOUT}={timeouts.broker_session_timeout_ms} ms plus "
        f"{bound_s:g} s; {n} move(s) to them cancelled, the run ends here: trigger a new run, it plans on "
        "the live brokers"
    )
