"""Only the latest claimant of a run's state acts: claims and fenced writes in the data store.

Airflow 3.3.2 lets a task it marked failed (or cleared) run on for seconds: its supervisor
learns it at the next heartbeat, sends SIGTERM, whose handler in the Task SDK only calls
``on_kill`` and returns, and SIGKILLs 5 s later. Meanwhile a cleared task's new attempt
starts. A runbook that records what it is about to do before doing it writes its state
before every action, so making every write check a claim stops the superseded process
before its next action: whoever acts for a run (each poke, a cleanup, a stop) first
:func:`claim` s the state, which bumps its ``fence``; :func:`write_fenced` refuses with
:class:`Superseded` once someone claimed after it. Both are compare-and-set on the store
(a local file under a lock, or a conditional PUT on an object store), so they hold for
workers on different machines.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.storage import Store

ATTEMPTS = 50  # compare-and-set retries when another writer wins a race (never a claim race we lose silently)


class Superseded(RunbookFailed):
    """Someone claimed this run's state after this process did (a newer attempt of the task,
    the cleanup task, a stop), or this task was killed: it must not act on the cluster again."""


def fence_of(text: str | None) -> int:
    """The claim a state's text records (0: never claimed)."""
    return int(json.loads(text or "{}").get("fence", 0) or 0)


def claim(store: Store, key: str, who: str) -> tuple[str, int]:
    """Take the state under ``key`` over for ``who``; (its text with the new claim, the fence)."""
    for _ in range(ATTEMPTS):
        current = store.read_text(key)
        if current is None:
            raise RunbookFailed(f"nothing to claim: {store.url_of(key)} is missing")
        data = json.loads(current)
        data["fence"] = fence_of(current) + 1
        data["claimed_by"] = who
        text = json.dumps(data, indent=2, sort_keys=True)
        if store.swap(key, current, text):
            return text, data["fence"]
    raise RunbookFailed(
        f"could not claim {store.url_of(key)}: {ATTEMPTS} writers won the race before this one"
    )


def write_fenced(
    store: Store, key: str, fence: int, text: str, halted: Callable[[], str | None] | None = None
) -> None:
    """Replace the state with ``text`` only while ``fence`` is its latest claim and nothing
    (``halted``: e.g. the task's ``on_kill``) told this process to stop."""
    reason = halted() if halted else None
    if reason:
        raise Superseded(f"{reason}: this process stops without acting")
    for _ in range(ATTEMPTS):
        current = store.read_text(key)
        if fence_of(current) != fence:
            who = json.loads(current or "{}").get("claimed_by") or "someone"
            raise Superseded(
                f"{who} claimed this run's state after this process (fence {fence_of(current)}, ours "
                f"{fence}): this process stops without acting"
            )
        data = json.loads(text)
        data["fence"] = fence
        data["claimed_by"] = json.loads(current).get("claimed_by")
        if store.swap(key, current, json.dumps(data, indent=2, sort_keys=True)):
            return
    raise RunbookFailed(
        f"could not write {store.url_of(key)}: {ATTEMPTS} writers won the race before this one"
    )


class Guarded:
    """``admin`` whose acting calls first ask ``guard(call_name)``, which raises Superseded when
    this process may no longer act; reads pass straight through. For one-shot tasks that act
    several times (the unclean recovery: reorder, elect, restore) without a state they write
    before each action."""

    def __init__(self, admin: Any, guard: Callable[[str], None], acting: tuple[str, ...]) -> None:
        self._admin, self._guard, self._acting = admin, guard, set(acting)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._admin, name)
        if name not in self._acting or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            """The admin call, after the guard let this process act."""
            self._guard(name)
            return attr(*args, **kwargs)

        return call


def run_guard(
    store: Store, key: str, who: str, halted: Callable[[], str | None] | None = None
) -> Callable[[str], None]:
    """Claim the run's fence object (created if absent) for ``who``; a guard that raises
    Superseded once someone claimed it after (a newer attempt of the task) or ``halted`` says so."""
    store.create(key, json.dumps({"fence": 0}))
    _, fence = claim(store, key, who)

    def guard(action: str) -> None:
        """Write ``action`` under the fence: raises Superseded when a newer attempt claimed it or the task
        was halted."""
        write_fenced(store, key, fence, json.dumps({"last_action": action}), halted)

    return guard
