"""Connect's status topic, read directly: what the workers wrote of one connector's items since a
mark, in the order they wrote it.

Why: the REST status is the last state only, and Connect keeps no restart count. A task that was
FAILED and fails again at once, with the same trace, reads exactly as before in every REST read
(its RESTARTING lasts milliseconds), so a restart of it could only end "unknown" when the settle
period ran out (issue #39 point 7: a restart whose task fails at once waited the full 60 s). The
status topic (the worker's ``status.storage.topic``, ``connect-status`` by default) keeps every
state the workers wrote, keyed ``status-connector-<name>`` and ``status-task-<name>-<id>``, each
key on one partition in write order (seen on Connect 3.9 and 4.3: a restart writes RESTARTING or
UNASSIGNED, then RUNNING when the task starts, then FAILED if it fails). A record of a restart
state after the mark taken before the restart, followed by FAILED, proves "failed again" at once.

Optional: the Connect connection's extras name the topic (``status_topic``) and the Kafka
connection of the cluster that holds it (``kafka_config_id``); the principal needs READ and
DESCRIBE on that topic (no group: partitions are assigned, nothing is committed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

#: states a worker writes only while it stops or (re)starts an item: after the mark, evidence of a restart
RESTART_STATES = frozenset({"RESTARTING", "UNASSIGNED", "RUNNING"})


def status_key(connector: str, item: str) -> str:
    """The status topic's key of ``connector`` ("connector") or of one of its tasks ("task 3")."""
    if item == "connector":
        return f"status-connector-{connector}"
    return f"status-task-{connector}-{item.removeprefix('task ')}"


class StatusLog:
    """Reads the status topic, through the admin facade, from a mark (its end offsets then) to its end now."""

    def __init__(self, topic: str, admin: Any) -> None:
        self.topic, self.admin = topic, admin  # admin: kafka_runbooks.admin.ClusterAdmin (or its reads)

    @classmethod
    def from_kafka_config(cls, topic: str, kafka_config: dict[str, Any], timeout_s: float = 6.0) -> StatusLog:
        """A status log read from the cluster ``kafka_config`` connects to."""
        from kafka_runbooks.admin import ClusterAdmin

        return cls(topic, ClusterAdmin(kafka_config, timeout_s=timeout_s))

    def mark(self) -> dict[int, int]:
        """The topic's end offset per partition now (what is written after it is news)."""
        return self.admin.topic_end_offsets(self.topic)

    def since(self, mark: dict[int, int], keys: Iterable[str]) -> dict[str, list[str]]:
        """The states written under ``keys`` after ``mark``, oldest first ("DELETED" for a tombstone)."""
        values = self.admin.values_since(self.topic, mark, set(keys))
        return {key: [_state(v) for v in written] for key, written in values.items()}


def _state(value: bytes | None) -> str:
    """A status record's state (Connect's JSON ``{"state": ...}``), "DELETED" for a tombstone."""
    if value is None:
        return "DELETED"
    try:
        return str(json.loads(value).get("state") or "?")
    except (ValueError, AttributeError):
        return "?"


def failed_again(states: list[str]) -> bool:
    """Whether the states written since the mark show a (re)start and then FAILED as the last one."""
    return bool(states) and states[-1] == "FAILED" and any(s in RESTART_STATES for s in states[:-1])


def restart_shown(states: list[str]) -> bool:
    """Whether the states written since the mark show the item stopped or (re)started."""
    return any(s in RESTART_STATES for s in states)


class StatusWatch:
    """A restart's view of the status log: the mark taken before it, then reads at most every
    ``every_s`` (each opens a consumer); a log that cannot be read is said once and left, the
    settle then goes on from the REST reads alone."""

    def __init__(
        self,
        log: StatusLog,
        connector: str,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.connector, self.every_s, self.clock = log, connector, every_s, clock
        self.error: str | None = None
        self.written: dict[str, list[str]] = {}
        self._last: float | None = None
        try:
            self.mark: dict[int, int] | None = log.mark()
        except Exception as exc:  # noqa: BLE001 - e.g. no READ on the topic: the REST reads decide alone
            self.mark, self.error = None, f"{type(exc).__name__}: {exc}"

    def failed_again(self, restarted: Iterable[str], shown: dict[str, bool]) -> str | None:
        """Mark in ``shown`` the items whose restart the log shows; why to give up when one of them
        was (re)started and is FAILED again (None: not that, or not read now)."""
        now = self.clock()
        if self.mark is None or (self._last is not None and now - self._last < self.every_s):
            return None
        self._last = now
        keys = {item: status_key(self.connector, item) for item in restarted}
        try:
            written = self.log.since(self.mark, keys.values())
        except Exception as exc:  # noqa: BLE001 - said once, then the REST reads decide alone
            self.mark, self.error = None, f"{type(exc).__name__}: {exc}"
            return None
        self.written = {item: written[key] for item, key in keys.items()}
        again = []
        for item, states in self.written.items():
            shown[item] = shown[item] or restart_shown(states)
            if failed_again(states):
                again.append(f"{item} ({' -> '.join(states)})")
        if not again:
            return None
        return (
            f"{', '.join(again)} FAILED again at once after the restart, as the workers wrote it to their "
            f"status topic {self.log.topic!r} since the restart"
        )
