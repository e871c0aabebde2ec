"""JSON state that sweeps keep between runs, outside Airflow's metadata DB.

One object per cluster at ``state/<kind>/<cluster>.json`` in the data store (cluster = the
connection id; :mod:`kafka_runbooks.storage`: a local folder by default, an object store
such as ``s3://…`` with distributed workers), so it survives an Airflow restart or a
rebuilt metadata DB, and an operator can read it with ``jq`` (or ``aws s3 cp … -``) or
delete one entry to forget it. Every write replaces the whole object (locally temp file +
rename, fsynced; on an object store one PUT), so a reader never sees half of one. A sweep
holds the cluster's lock for the whole of load, decide, save (:meth:`Store.locked`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kafka_runbooks import storage
from kafka_runbooks.errors import BadInput
from kafka_runbooks.paths import safe_name

STATE_VERSION = 1
E = TypeVar("E", bound="StateEntry")


def write_atomic(path: Path, text: str) -> None:
    """Replace the local file ``path`` with ``text`` so a reader never sees half a file, even after a crash."""
    storage._write_local_atomic(Path(path), text.encode("utf-8"))


class StateEntry:
    """A dataclass kept in a state file, read back by field name.

    The fields this version knows are taken (a missing one is None) and an unknown one is
    dropped, so a file written by an older or a newer version still loads: a sweep that cannot
    read its own memory would start every countdown again.
    """

    @classmethod
    def from_dict(cls: type[E], raw: dict[str, Any]) -> E:
        """The entry from its JSON object, by field name (see the class)."""
        return cls(**{k: raw.get(k) for k in cls.__dataclass_fields__})


class ClusterStateFile:
    """The entries of one kind of state (``section``) for one cluster, in one JSON object.

    Subclasses name the ``kind`` (the folder under ``state/``) and the ``section`` key,
    and turn entries into their own records in ``load``/``save``. ``directory`` (a local
    folder) replaces the data store, for tests and for state kept next to a run's files.
    """

    kind: str = ""
    section: str = "entries"

    def __init__(self, cluster: str, directory: Path | None = None) -> None:
        if not cluster:
            raise BadInput(f"a {self.kind} state file needs the cluster's name (its connection id)")
        self.cluster = cluster
        if directory:
            self.store, prefix = storage.Store(str(Path(directory).resolve())), ""
        else:
            self.store, prefix = storage.store(), f"state/{self.kind}"
        name = f"{safe_name(cluster)}.json"
        self.key = f"{prefix}/{name}" if prefix else name
        self.lock_key = f"{prefix}/.{name}.lock" if prefix else f".{name}.lock"
        # where it is, for messages (and a local Path, for tools and tests)
        self.path: Path | str = (
            self.store.local_path(self.key) if self.store.is_local else self.store.url_of(self.key)
        )
        self.directory = self.store.local_path(prefix) if self.store.is_local else self.store.url_of(prefix)

    def read_entries(self) -> dict[str, Any]:
        """The section's entries; no file yet is none, a broken file is a clear error to fix or
        delete (never read as empty: that would forget every countdown silently)."""
        text = self.store.read_text(self.key)
        if text is None:
            return {}
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise BadInput(f"state file {self.path} is not valid JSON ({exc}); fix or delete it") from exc
        return dict(raw.get(self.section) or {})

    def write_entries(self, entries: dict[str, Any]) -> None:
        """Replace the whole object at once, so a reader never sees half of one."""
        body = {"version": STATE_VERSION, "cluster": self.cluster, self.section: entries}
        self.store.write_text(self.key, json.dumps(body, indent=1, sort_keys=True))

    @contextmanager
    def locked(self) -> Iterator[ClusterStateFile]:
        """Hold the cluster's lock for a whole sweep (load, decide, act, save)."""
        with self.store.locked(self.lock_key):
            yield self
