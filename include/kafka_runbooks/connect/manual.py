"""A restart on request: the connector, some of its tasks, or the connector with its failed tasks.

Bad input fails before any call; an unknown connector or task id fails after the one
listing call, before any restart, with a message naming what does exist.

Success is read back from the worker, never assumed from its answer. The restart answer
(202/204) comes before the restart shows in the status (KIP-745 restarts are applied
asynchronously; the status is read back from Kafka's status topic), so a read right after
it can still be the state from before the restart. A restart is settled only when:

- every restarted item (what the worker said it restarts) has shown its restart in a status
  read after the accepted restart: RESTARTING, or a (state, worker, trace) other than in the
  read before the restart, from the same worker REST; and
- from then on, the connector and the restarted tasks read RUNNING in every read for
  ``stable_s`` seconds in a row (a task FAILED before and RUNNING after must stay RUNNING),
  within ``settle_timeout_s``.

Connect keeps no restart count: an item that reads exactly as before in every read (its
short RESTARTING/UNASSIGNED state fell between two reads) did not show its restart, and the
outcome is said to be unknown, never settled. Otherwise the restart fails
(:class:`RestartNotSettled`) with what was seen, or only warns when asked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.connect.client import (
    ConnectClient,
    ConnectError,
    ConnectorStatus,
    UnknownConnector,
    UnknownTask,
)
from kafka_runbooks.connect.status_log import StatusLog, StatusWatch
from kafka_runbooks.errors import BadInput, RunbookFailed

log = logging.getLogger(__name__)
STEP = "connect-restart"
SCOPES = {
    "failed": "the connector if it FAILED and its FAILED tasks (one KIP-745 call)",
    "connector": "the connector instance only (its tasks keep running)",
    "tasks": "the given task ids only",
    "all": "the connector and all its tasks (KIP-745, onlyFailed=false)",
}
RUNNING = "RUNNING"
STABLE_S = 5.0
POLL_S = 0.5
FAST_POLL_S = 0.05  # right after the restart, to read the short RESTARTING/UNASSIGNED states
FAST_POLL_FOR_S = 5.0
# A task restarted on its own while RUNNING may show no state in between (Connect writes no
# RESTARTING for a per-task restart and its UNASSIGNED lasts milliseconds): such a restart
# settles only on RUNNING read on every read for this long after the restart was accepted,
# and says that the restart itself was not seen
UNSEEN_RESTART_HOLD_S = 15.0


class RestartNotSettled(ConnectError, RunbookFailed):
    """The restart was made, but what it restarted did not settle RUNNING in time."""

    def __init__(self, message: str, seen: dict[str, Any]) -> None:
        super().__init__(message)
        self.seen = seen


@dataclass(frozen=True)
class Settled:
    """What reading the status back after a restart found."""

    settled: bool  # the restart showed, then the connector and watched tasks read RUNNING stable_s
    after: dict[str, Any]  # the last status read (ConnectorStatus.as_dict)
    seen: dict[str, list[str]]  # the states each watched item went through, repeats folded
    waited_s: float
    problem: str | None  # why it did not settle (None when it did)


def validate_request(connector: str, scope: str, task_ids: Iterable[int] | None) -> list[int]:
    """Check the request's shape; returns the task ids as a sorted list without duplicates."""
    if not isinstance(connector, str) or not connector.strip():
        raise BadInput("connector: give the connector's name")
    if scope not in SCOPES:
        raise BadInput(f"scope must be one of {sorted(SCOPES)}, got {scope!r}")
    ids = list(task_ids or [])
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise BadInput(f"task ids are integers >= 0, got {t!r}")
    if scope == "tasks" and not ids:
        raise BadInput("scope 'tasks' needs task_ids, e.g. [0]")
    if scope != "tasks" and ids:
        raise BadInput(f"task_ids are only for scope 'tasks' (scope is {scope!r})")
    return sorted(set(ids))


def manual_restart(
    client: ConnectClient,
    connector: str,
    scope: str = "failed",
    task_ids: Iterable[int] | None = None,
    *,
    settle_timeout_s: float = 60.0,
    stable_s: float = STABLE_S,
    fail_if_not_settled: bool = True,
    logger: logging.Logger | None = None,
    status_log: StatusLog | None = None,
) -> dict[str, Any]:
    """Restart, then wait until what was restarted runs; raise :class:`RestartNotSettled` if it does not.
    With ``status_log`` (Connect's status topic), a restart that fails again at once ends at once."""
    logger = logger or log
    ids = validate_request(connector, scope, task_ids)
    if settle_timeout_s < 0 or stable_s < 0:
        raise BadInput(f"settle_timeout_s and stable_s must be >= 0, got {settle_timeout_s}, {stable_s}")
    before = _status_before(client, connector, ids)
    decisions.record(
        STEP,
        f"restart {scope}",
        f"requested by hand: {SCOPES[scope]}",
        observed={**before.as_dict(), "task_ids": ids},
        subject=f"{client.url}/{connector}",
        logger=logger,
    )
    watch = StatusWatch(status_log, connector) if status_log is not None else None  # marked before it
    result = _restart_scope(client, connector, scope, ids, before)
    settle = settle_restart(
        client,
        connector,
        result["restarted_tasks"],
        before=before,
        restarted_connector=result["restarted_connector"],
        timeout_s=settle_timeout_s,
        stable_s=stable_s,
        watch=watch,
    )
    report = {"connector": connector, "scope": scope, **result, "before": before.as_dict()}
    report.update(after=settle.after, settled=settle.settled, seen=settle.seen, waited_s=settle.waited_s)
    _judge(client, connector, result, settle, stable_s, fail_if_not_settled, logger)
    return {**report, **_status_log_facts(watch)}


def _status_before(client: ConnectClient, connector: str, ids: list[int]) -> ConnectorStatus:
    """The connector's status before the restart, from one listing call.

    An unknown connector or task id fails here, before any restart, naming what does exist
    (a typo must not restart something else, nor nothing silently).
    """
    listing = client.list_connectors()
    if connector not in listing:
        raise UnknownConnector(
            f"connector {connector!r} does not exist on {client.url}; it has: {sorted(listing) or 'no connectors'}",
            404,
        )
    before = listing[connector]
    unknown = sorted(set(ids) - set(before.task_ids))
    if unknown:
        raise UnknownTask(
            f"connector {connector!r} on {client.url} has no task {unknown}; its tasks are {before.task_ids}",
            404,
        )
    return before


def _restart_scope(
    client: ConnectClient, connector: str, scope: str, ids: list[int], before: ConnectorStatus
) -> dict[str, Any]:
    """The restart calls for the scope; returns what the worker says it restarted.

    ``tasks`` and ``connector`` are plain per-item calls; ``failed`` and ``all`` are one
    KIP-745 call (the client falls back to per-item calls on an older worker).
    """
    if scope == "tasks":
        statuses = [client.restart_task(connector, t) for t in ids]
        return {
            "method": "per-task",
            "restarted_connector": False,
            "restarted_tasks": ids,
            "http_statuses": statuses,
        }
    if scope == "connector":
        return {
            "method": "connector",
            "restarted_connector": True,
            "restarted_tasks": [],
            "http_statuses": [client.restart_connector(connector)],
        }
    outcome = client.restart(connector, include_tasks=True, only_failed=scope == "failed", known=before)
    return outcome.as_dict()


def _judge(
    client: ConnectClient,
    connector: str,
    result: dict[str, Any],
    settle: Settled,
    stable_s: float,
    fail_if_not_settled: bool,
    logger: logging.Logger,
) -> None:
    """Restarted only when read back settled: else NOT SETTLED, raised unless only a warning is asked.

    The worker's answer to the restart call says nothing about whether what it restarted
    runs; the record says what was seen since, so the person reading the log need not look.
    """
    subject = f"{client.url}/{connector}"
    action = (
        f"{result['method']}: connector={result['restarted_connector']} tasks={result['restarted_tasks']}"
    )
    if settle.settled:
        decisions.record(
            STEP,
            "restarted",
            f"the restart showed in the status, then the connector and the restarted tasks read "
            f"RUNNING for {stable_s:g}s in a row (after {settle.waited_s:.1f}s)",
            observed=settle.after,
            action=action,
            subject=subject,
            logger=logger,
        )
        return
    problem = settle.problem
    decisions.record(
        STEP,
        "NOT SETTLED" if fail_if_not_settled else "not settled (warning only)",
        f"the restart was made but {problem}",
        observed={"after": settle.after, "seen": settle.seen},
        action=action,
        subject=subject,
        logger=logger,
        level=logging.ERROR if fail_if_not_settled else logging.WARNING,
    )
    if fail_if_not_settled:
        raise RestartNotSettled(
            f"connector {connector!r} on {client.url}: the restart was made but {problem}; "
            f"states seen since the restart: {settle.seen}",
            settle.seen,
        )


def settle_restart(
    client: ConnectClient,
    connector: str,
    task_ids: Iterable[int],
    *,
    before: ConnectorStatus,
    restarted_connector: bool = False,
    timeout_s: float,
    stable_s: float = STABLE_S,
    poll_s: float = POLL_S,
    watch: StatusWatch | None = None,
) -> Settled:
    """Read the status until the restart has shown and the connector and ``task_ids`` have
    read RUNNING for ``stable_s`` since.

    Until every restarted item showed its restart (:func:`_shows_restart`), a RUNNING read
    may be the state from before it (applied asynchronously; no restart count). Gives up
    early on a restarted item FAILED after its restart showed, in the REST read or in the
    status topic (``watch``); one never shown is unknown.
    """
    watched, restarted, was, shown, seen = _items(before, task_ids, restarted_connector)
    started = time.monotonic()
    deadline = started + timeout_s
    running_since = held_since = None  # held: every read RUNNING since, restart shown or not
    while True:
        status = client.connector_status(connector)
        now = time.monotonic()
        states = _states(status, watched)
        _note_read(status, watched, was, shown, seen)
        all_running = all(state == RUNNING for state in states.values())
        held_since = (held_since or now) if all_running else None
        if all_running and _unseen_restart_held(shown, was, held_since, now, stable_s):
            return _settled(True, status, seen, started, None)
        if all(shown.values()) and all_running:
            running_since = now if running_since is None else running_since
            if now - running_since >= stable_s:
                return _settled(True, status, seen, started, None)
        else:
            running_since = None
            problem = _failed_again(states, shown, restarted, status) or _written_failed_again(
                watch, restarted, shown, states
            )
            if problem is not None:
                return _settled(False, status, seen, started, problem)
        if now >= deadline:
            return _settled(
                False, status, seen, started, _timed_out(states, shown, status, timeout_s, stable_s)
            )
        time.sleep(_pause_s(shown, now - started, poll_s, deadline - now))


def _items(before: ConnectorStatus, task_ids: Iterable[int], restarted_connector: bool) -> tuple:
    """What a settle watches (the connector and the tasks), what was restarted, each item's identity
    before, whether each has shown its restart (an item not restarted: every read is current), and
    the states seen of each so far."""
    ids = sorted(set(task_ids))
    watched = ["connector"] + [f"task {t}" for t in ids]
    restarted = {f"task {t}" for t in ids} | ({"connector"} if restarted_connector else set())
    shown = {w: w not in restarted for w in watched}
    seen: dict[str, list[str]] = {w: [] for w in watched}
    return watched, restarted, _identities(before, watched), shown, seen


def _note_read(
    status: ConnectorStatus,
    watched: list[str],
    was: dict[str, tuple],
    shown: dict[str, bool],
    seen: dict[str, list[str]],
) -> None:
    """Fold one status read in: whether each item has shown its restart yet (a read before that
    may be the state from before it), and each state change, for the person reading a failure."""
    for item, identity in _identities(status, watched).items():
        shown[item] = shown[item] or _shows_restart(identity, was[item])
        if not seen[item] or seen[item][-1] != identity[0]:
            seen[item].append(identity[0])


def _pause_s(shown: dict[str, bool], elapsed_s: float, poll_s: float, left_s: float) -> float:
    """Poll fast at first while a restart has not shown yet (a RUNNING read may still be the
    state from before it), else every ``poll_s``; never past the deadline."""
    fast = not all(shown.values()) and elapsed_s < FAST_POLL_FOR_S
    return max(0.0, min(FAST_POLL_S if fast else poll_s, left_s))


def _written_failed_again(
    watch: StatusWatch | None, restarted: set[str], shown: dict[str, bool], states: dict[str, str]
) -> str | None:
    """What the status topic says while a restarted item has not shown its restart or is not
    RUNNING: why to give up when it was (re)started and FAILED again (None: not that, or no topic)."""
    if watch is None or all(shown[i] and states[i] == RUNNING for i in restarted):
        return None
    return watch.failed_again(restarted, shown)


def _status_log_facts(watch: StatusWatch | None) -> dict[str, Any]:
    """What the status topic said, for the report: the states written since the restart, or why not read."""
    if watch is None:
        return {}
    return {
        "status_topic": watch.log.topic,
        "status_written": watch.written,
        "status_topic_error": watch.error,
    }


def _failed_again(
    states: dict[str, str], shown: dict[str, bool], restarted: set[str], status: ConnectorStatus
) -> str | None:
    """Why to give up early (None: not yet): a restarted item FAILED after its restart showed. A
    FAILED read before that may be the state from before the restart, so it proves nothing."""
    failed_again = [i for i, st in states.items() if st == "FAILED" and shown[i] and i in restarted]
    if failed_again:
        return _describe(failed_again, states, status, " again after the restart")
    return None


def _unseen_restart_held(
    shown: dict[str, bool], was: dict[str, tuple], held_since: float | None, now: float, stable_s: float
) -> bool:
    """A restart of items that were RUNNING before and showed nothing in between settles once
    every read since the acceptance has been RUNNING for :data:`UNSEEN_RESTART_HOLD_S` (a read
    from before the restart cannot last that long: the restarted task fails or runs by then)."""
    unseen = [item for item, ok in shown.items() if not ok]
    return (
        bool(unseen)
        and all(was[item][0] == RUNNING for item in unseen)
        and held_since is not None
        and now - held_since >= max(stable_s, UNSEEN_RESTART_HOLD_S)
    )


def _identities(status: ConnectorStatus, watched: list[str]) -> dict[str, tuple[str, str | None, str | None]]:
    """Each watched item's (state, worker_id, trace) in one status read (MISSING: not listed)."""
    tasks = {f"task {t.task_id}": (t.state, t.worker_id, t.trace) for t in status.tasks}
    own = (status.state, status.worker_id, status.trace)
    return {w: own if w == "connector" else tasks.get(w, ("MISSING", None, None)) for w in watched}


def _shows_restart(
    now: tuple[str, str | None, str | None], before: tuple[str, str | None, str | None]
) -> bool:
    """Whether a read after the accepted restart shows it happened.

    The worker writes RESTARTING (KIP-745) or UNASSIGNED (a running task stopping) to its
    status topic during a restart, then RUNNING or FAILED: any of state, worker or trace
    differing from the read before the restart (same worker REST, same status topic) is a
    state written since. The same triple is not evidence: a task RUNNING before and after,
    its transient states missed between two reads, or FAILED again with the very same
    trace, reads exactly as before; Connect has no restart counter to tell them apart.
    """
    return now[0] == "RESTARTING" or now != before


def _timed_out(
    states: dict[str, str], shown: dict[str, bool], status: ConnectorStatus, timeout_s: float, stable_s: float
) -> str:
    """Why the settle period ran out: an item not RUNNING, a restart never shown, or too short."""
    stuck = [i for i, st in states.items() if st != RUNNING]
    if stuck:
        return f"{_describe(stuck, states, status)} not RUNNING after {timeout_s:g}s (settle_timeout_s)"
    unshown = [i for i, ok in shown.items() if not ok]
    if unshown:
        return (
            f"{', '.join(unshown)} read exactly as before the restart in every read for {timeout_s:g}s "
            "(settle_timeout_s): whether the restart took effect is unknown (Connect keeps no restart "
            "count; the states it wrote during the restart were not read)"
        )
    return f"RUNNING for less than {stable_s:g}s in a row when settle_timeout_s ({timeout_s:g}s) ran out"


def _states(status: ConnectorStatus, watched: list[str]) -> dict[str, str]:
    tasks = {f"task {t.task_id}": t.state for t in status.tasks}
    return {w: status.state if w == "connector" else tasks.get(w, "MISSING") for w in watched}


def _describe(items: list[str], states: dict[str, str], status: ConnectorStatus, what: str = "") -> str:
    """``task 0 FAILED again after the restart (first line of its trace)``, comma separated."""
    parts = []
    for item in items:
        if item == "connector":
            trace = status.trace
        else:
            trace = next((t.trace for t in status.tasks if f"task {t.task_id}" == item), None)
        first = f" ({trace.splitlines()[0][:200]})" if trace and states[item] == "FAILED" else ""
        parts.append(f"{item} {states[item]}{what}{first}")
    return ", ".join(parts)


def _settled(
    ok: bool, status: ConnectorStatus, seen: dict[str, list[str]], started: float, problem: str | None
) -> Settled:
    return Settled(ok, status.as_dict(), seen, round(time.monotonic() - started, 3), problem)
