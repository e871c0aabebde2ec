"""JSON state that sweeps keep between runs, outside Airflow's metadata DB.

One file per cluster under ``$KAFKA_RUNBOOKS_DATA_DIR/state/<kind>/<cluster>.json`` (cluster =
the connection id), so it survives an Airflow restart or a rebuilt metadata DB, and an
operator can read it with ``jq`` or delete one entry to forget it. Writes are atomic
(temp file + rename, fsynced); a sweep holds an exclusive ``flock`` for the whole of
load, decide, save. With a distributed executor the data dir must be a volume every
worker mounts, as for the runbooks' reports.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafka_runbooks.paths import data_dir, safe_name

STATE_VERSION = 1


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader never sees half a file, even after a crash."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ClusterStateFile:
    """The entries of one kind of state (``section``) for one cluster, in one JSON file.

    Subclasses name the ``kind`` (the folder under ``state/``) and the ``section`` key,
    and turn entries into their own records in ``load``/``save``.
    """

    kind: str = ""
    section: str = "entries"

    def __init__(self, cluster: str, directory: Path | None = None) -> None:
        if not cluster:
            raise ValueError(f"a {self.kind} state file needs the cluster's name (its connection id)")
        self.cluster = cluster
        self.directory = Path(directory) if directory else data_dir() / "state" / self.kind
        self.path = self.directory / f"{safe_name(cluster)}.json"

    def read_entries(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"state file {self.path} is not valid JSON ({exc}); fix or delete it") from exc
        return dict(raw.get(self.section) or {})

    def write_entries(self, entries: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        body = {"version": STATE_VERSION, "cluster": self.cluster, self.section: entries}
        write_atomic(self.path, json.dumps(body, indent=1, sort_keys=True))

    @contextmanager
    def locked(self) -> Iterator[ClusterStateFile]:
        """Hold the cluster's lock for a whole sweep (load, decide, act, save)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f".{self.path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
