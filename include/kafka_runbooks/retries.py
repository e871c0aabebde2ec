"""How a call to Kafka is tried again: one small policy on tenacity, for every retry loop.

A broker failure is exactly when the runbooks read and write the cluster, so a dead or
frozen broker must cost a retry, not the run. What differs between calls is only which
errors are worth another attempt, how many attempts, how long to wait before each, and
what to do after a failure (forget the cached controller): a :class:`RetryPolicy` holds
the first three, :meth:`RetryPolicy.call` takes the last. The last failure is raised as it
came, so the caller says in its own words what "gave up" means (``ClusterUnreachable``,
or a per-partition error).

tenacity does the looping (it comes with Airflow; it does not need Airflow). Sleep and
clock are injectable so the policy is tested without waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
from tenacity.stop import stop_base
from tenacity.wait import wait_base

T = TypeVar("T")
log = logging.getLogger(__name__)


class _stop_before_deadline(stop_base):
    """Stop when the next attempt would start at or after ``deadline_s`` from the first one,
    by ``clock`` (tenacity's ``stop_before_delay``, on a clock tests can drive)."""

    def __init__(self, deadline_s: float, clock: Callable[[], float], started: float) -> None:
        self.deadline_s, self.clock, self.started = deadline_s, clock, started

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.clock() - self.started + retry_state.upcoming_sleep >= self.deadline_s


@dataclass(frozen=True)
class RetryPolicy:
    """Which errors are tried again, how often, and the wait before each new attempt.

    ``attempts`` counts the first one; ``wait`` is a tenacity wait (the n-th retry waits
    ``wait`` of attempt n); ``deadline_s``, when set, also stops when the next attempt
    would start that long or longer after the first (none of the facade's loops sets one:
    each of their attempts has its own request deadline).
    """

    attempts: int
    wait: wait_base
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    deadline_s: float | None = None

    def call(
        self,
        what: str,
        fn: Callable[[], T],
        *,
        after_failure: Callable[[BaseException], Any] | None = None,
        sleep: Callable[[float], Any] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> T:
        """``fn()`` until it returns, an error not in ``retry_on`` is raised, or the attempts
        (or the deadline) run out; then the last error is raised as it came.

        ``after_failure`` runs after every failed attempt, the last one too (a failed
        controller request forgets the cached controller, for whoever tries next).
        """
        clock = clock or time.monotonic
        stop: stop_base = tenacity.stop_after_attempt(self.attempts)
        if self.deadline_s is not None:
            stop = stop | _stop_before_deadline(self.deadline_s, clock, clock())
        retrying = tenacity.Retrying(
            stop=stop,
            wait=self.wait,
            retry=tenacity.retry_if_exception_type(self.retry_on),
            sleep=sleep or (lambda seconds: time.sleep(seconds)),  # time.sleep as it is when called
            before_sleep=lambda state: _log_retry(what, state),
            reraise=True,
        )
        return retrying(_attempt, fn, after_failure)


def _attempt(fn: Callable[[], T], after_failure: Callable[[BaseException], Any] | None) -> T:
    try:
        return fn()
    except Exception as exc:
        if after_failure is not None:
            after_failure(exc)
        raise


def _log_retry(what: str, state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    wait = state.next_action.sleep if state.next_action is not None else 0.0
    log.info("%s failed (%s: %s); retrying on another broker in %.1f s", what, type(exc).__name__, exc, wait)


def linear(
    attempts: int = 4, step_s: float = 0.5, retry_on: tuple[type[BaseException], ...] = (Exception,)
) -> RetryPolicy:
    """``attempts`` tries, waiting ``step_s`` times the number of the failed attempt before the
    next (0.5 s, 1 s, 1.5 s: a read on a broker that has just died, asked again elsewhere)."""
    return RetryPolicy(attempts, tenacity.wait_incrementing(start=step_s, increment=step_s), retry_on)


def exponential(attempts: int = 4, first_s: float = 0.5, max_s: float = 5.0) -> RetryPolicy:
    """``attempts`` tries after any error, waiting ``first_s``, then twice as long each time,
    at most ``max_s`` (a controller request: the cluster needs a moment to stop naming a
    broker that has just died)."""
    return RetryPolicy(attempts, tenacity.wait_exponential(multiplier=first_s, max=max_s))


class _stop_at_deadline(stop_base):
    """Stop once ``timeout_s`` has passed since ``started`` by ``clock``, judged right after a read
    (the last read is the first one at or past the deadline, as the loops this replaced did)."""

    def __init__(self, timeout_s: float, clock: Callable[[], float], started: float) -> None:
        self.timeout_s, self.clock, self.started = timeout_s, clock, started

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.clock() - self.started >= self.timeout_s


def poll_until(
    read: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout_s: float,
    interval_s: float,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Any] | None = None,
) -> tuple[T, bool]:
    """``read()`` every ``interval_s`` until ``done`` holds on one answer or ``timeout_s`` has passed
    since the first read: (the last answer, whether it was done). The caller says what a timeout
    means (a RunbookFailed naming the last answer, or the last answer as the evidence); an error
    of ``read`` is raised as it came (a failed read is not a "not yet")."""
    clock = clock or time.monotonic
    retrying = tenacity.Retrying(
        stop=_stop_at_deadline(timeout_s, clock, clock()),
        wait=tenacity.wait_fixed(interval_s),
        retry=tenacity.retry_if_result(lambda answer: not answer[1]),
        sleep=sleep or (lambda seconds: time.sleep(seconds)),  # time.sleep as it is when called
        retry_error_callback=lambda state: state.outcome.result(),
    )

    def judged() -> tuple[T, bool]:
        """One read and its judgement: tenacity retries on the result, so both travel together."""
        answer = read()
        return answer, bool(done(answer))

    return retrying(judged)


def hold_until(
    read: Callable[[], T],
    holds: Callable[[T], bool],
    *,
    settle_s: float,
    timeout_s: float,
    interval_s: float,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Any] | None = None,
) -> tuple[T, bool]:
    """A settle period: ``read()`` every ``interval_s`` until ``holds`` has been true on every read
    for ``settle_s`` (a lucky read proves nothing: a read where it does not hold starts the period
    again), or ``timeout_s`` has passed since the first read: (the last answer, whether it held for
    the whole period). Built on :func:`poll_until`; ``holds`` sees every answer, in order."""
    clock = clock or time.monotonic
    held_since: list[float] = []  # when the current run of holding reads began (empty: none)

    def settled(answer: T) -> bool:
        """Whether this read ends the period: it holds, and has on every read for ``settle_s``."""
        now = clock()
        if not holds(answer):
            held_since.clear()
            return False
        if not held_since:
            held_since.append(now)
        return now - held_since[0] >= settle_s

    return poll_until(read, settled, timeout_s=timeout_s, interval_s=interval_s, clock=clock, sleep=sleep)


def until_true(
    attempt: Callable[[], bool],
    *,
    first_s: float,
    max_s: float,
    sleep: Callable[[float], Any] | None = None,
) -> None:
    """``attempt()`` until it returns True, waiting ``first_s``, then twice as long each time, at
    most ``max_s``, between attempts; no limit on their number (a lock whose holder stopped is
    taken over by the attempt itself once it expires, which bounds the wait)."""
    tenacity.Retrying(
        wait=tenacity.wait_exponential(multiplier=first_s, max=max_s),
        retry=tenacity.retry_if_result(lambda taken: not taken),
        sleep=sleep or (lambda seconds: time.sleep(seconds)),  # time.sleep as it is when called
    )(attempt)
