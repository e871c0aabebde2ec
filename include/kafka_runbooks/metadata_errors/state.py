"""Each node's last counter values, kept between sweeps in a JSON file.

``$KAFKA_RUNBOOKS_DATA_DIR/state/metadata_errors/<cluster>.json`` (cluster = the Kafka
connection id), outside Airflow's metadata DB so "increased since the last sweep"
survives an Airflow restart or a rebuilt DB. An operator can read it with ``jq`` or
delete a node's entry to re-base it. Writes are atomic (temp file + rename) under an
exclusive ``flock``; the sweep task runs one at a time.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_runbooks.paths import data_dir, safe_name

STATE_VERSION = 1


@dataclass
class NodeState:
    counters: dict[str, float] = field(default_factory=dict)
    seen_at_ms: int | None = None
    process_start_s: float | None = None
    increase_streak: int = 0  # consecutive sweeps in which a counter went up
    restart_run_id: str | None = None  # the last kafka_broker_restart run this sweep started
    decision_run_id: str | None = None  # the sweep run that last asked a person about this node

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeState:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["counters"] = {str(k): float(v) for k, v in (known.get("counters") or {}).items()}
        return cls(**known)


def default_state_dir() -> Path:
    return data_dir() / "state" / "metadata_errors"


class MetadataErrorStateStore:
    def __init__(self, cluster: str, directory: Path | None = None) -> None:
        if not cluster:
            raise ValueError("a state store needs the cluster's name (its Kafka connection id)")
        self.cluster = cluster
        self.directory = Path(directory) if directory else default_state_dir()
        self.path = self.directory / f"{safe_name(cluster)}.json"

    def load(self) -> dict[int, NodeState]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"state file {self.path} is not valid JSON ({exc}); fix or delete it") from exc
        return {int(k): NodeState.from_dict(v) for k, v in (raw.get("nodes") or {}).items()}

    def save(self, states: dict[int, NodeState]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        body = {
            "version": STATE_VERSION,
            "cluster": self.cluster,
            "nodes": {str(k): s.as_dict() for k, s in sorted(states.items())},
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
    def locked(self) -> Iterator[MetadataErrorStateStore]:
        """Hold the lock for a whole sweep (load, decide, save)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f".{self.path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
