"""Settle periods that can see a death.

A settle (a verify's "held for N s", a leader's "held") proves nothing shorter than the time
Kafka needs to notice a death: until ``broker.session.timeout.ms`` has passed, a broker killed a
moment ago is still registered, unfenced, leader and in its ISRs. So a settle period is never
shorter than the cluster's session timeout, and its last read asks the nodes themselves
(:mod:`.serving`): a leader or an in-sync replica that does not answer itself undoes the settle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka_runbooks import retries
from kafka_runbooks.evidence.settings import ClusterTimeouts

T = TypeVar("T")


def settle_period_s(requested_s: float, timeouts: ClusterTimeouts) -> float:
    """The settle period to hold: the one asked for, never shorter than the session timeout."""
    return max(float(requested_s), timeouts.broker_session_timeout_s)


def hold_then_ask(
    read: Callable[[], T],
    holds: Callable[[T], bool],
    ask: Callable[[T], dict[int, str]],
    *,
    requested_settle_s: float,
    timeouts: ClusterTimeouts,
    timeout_s: float,
    interval_s: float,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Any] | None = None,
) -> tuple[T, bool, dict[int, str]]:
    """``holds`` on every read for the settle period (:func:`settle_period_s`), then ``ask`` the
    nodes the last read relies on (``{node: why}`` of those that do not answer themselves). A silent
    node starts the period again, until ``timeout_s``: (the last answer, whether it held and every
    node answered, the silent nodes of the last ask)."""
    settle_s = settle_period_s(requested_settle_s, timeouts)
    clock = clock or time.monotonic
    started = clock()
    silent: dict[int, str] = {}
    while True:
        left = max(0.0, timeout_s - (clock() - started))
        answer, held = retries.hold_until(
            read, holds, settle_s=settle_s, timeout_s=left, interval_s=interval_s, clock=clock, sleep=sleep
        )
        if not held:
            return answer, False, silent
        silent = ask(answer)
        if not silent or clock() - started >= timeout_s:
            return answer, not silent, silent
