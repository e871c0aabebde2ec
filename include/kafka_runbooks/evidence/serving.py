"""Does this broker serve now? Its own answer, on its own listener.

DescribeCluster keeps a crashed broker's registration unfenced, and the ISRs keep it, until its
session times out (``broker.session.timeout.ms``); a frozen (SIGSTOP) broker keeps both for as
long as it is frozen and beyond. A KRaft broker opens its listeners only once unfenced, so a
Metadata answer sent to that broker alone (never retried on another) says its current process
is registered and serving. Anything that kept the answer away is "does not answer", with why.
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_TIMEOUT_S = 5.0


def silent_brokers(admin, broker_ids: Iterable[int], timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[int, str]:
    """The brokers of ``broker_ids`` that do not answer themselves now, each with why (empty: all
    answer)."""
    silent: dict[int, str] = {}
    for broker_id in sorted(set(broker_ids)):
        why = admin.broker_answers(broker_id, timeout_s)
        if why is not None:
            silent[broker_id] = why
    return silent


def serving(admin, broker_ids: Iterable[int], timeout_s: float = DEFAULT_TIMEOUT_S) -> set[int]:
    """The brokers of ``broker_ids`` that answer themselves now."""
    ids = set(broker_ids)
    return ids - set(silent_brokers(admin, ids, timeout_s))
