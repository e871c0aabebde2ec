"""Where the auto-restart sweep keeps each connector's restart count and last restart time.

A JSON file per Connect cluster under the runbooks' data dir
(``$KAFKA_RUNBOOKS_DATA_DIR/state/connect_autorestart/<conn_id>.json``), not an Airflow
Variable, because:

- it lives outside Airflow's processes and metadata DB, so it survives a restart of Airflow
  and even a rebuilt metadata DB (the back-off must not start again from minute 0 because
  the scheduler was redeployed);
- the sweep runs every minute; a file written only when something changed does not churn
  the metadata DB or fill the Variable audit log;
- an operator can read it (``jq``) or delete one connector's entry to forget its history,
  next to the reports the runbooks already write in the same data dir.

Writes are atomic (temp file + rename) under an exclusive ``flock``, and the DAG runs one
sweep at a time (``max_active_runs=1``). With a distributed executor the data dir must be
a volume every worker mounts, as for the runbooks' reports.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_runbooks.connect.policy import RestartState
from kafka_runbooks.paths import data_dir, safe_name

STATE_VERSION = 1


def default_state_dir() -> Path:
    return data_dir() / "state" / "connect_autorestart"


class JsonStateStore:
    """Per-connector :class:`RestartState` of one Connect cluster, in one JSON file."""

    def __init__(self, cluster: str, directory: Path | None = None) -> None:
        if not cluster:
            raise ValueError("a state store needs the cluster's name (its connection id)")
        self.cluster = cluster
        self.directory = Path(directory) if directory else default_state_dir()
        self.path = self.directory / f"{safe_name(cluster)}.json"

    def load(self) -> dict[str, RestartState]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"state file {self.path} is not valid JSON ({exc}); fix or delete it") from exc
        return {name: RestartState.from_dict(entry) for name, entry in (raw.get("connectors") or {}).items()}

    def save(self, states: dict[str, RestartState]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        body = {
            "version": STATE_VERSION,
            "cluster": self.cluster,
            "connectors": {name: s.as_dict() for name, s in sorted(states.items())},
        }
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(body, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def locked(self) -> Iterator[JsonStateStore]:
        """Hold the cluster's lock for a whole sweep (load, decide, restart, save)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f".{self.path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
