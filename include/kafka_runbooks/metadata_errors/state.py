"""Each node's last counter values, kept between sweeps in a JSON file.

``state/metadata_errors/<cluster>.json`` in the data store (cluster = the Kafka
connection id), outside Airflow's metadata DB so "increased since the last sweep"
survives an Airflow restart or a rebuilt DB. An operator can read it with ``jq`` or
delete a node's entry to re-base it. Writes are atomic (temp file + rename) under an
exclusive ``flock``; the sweep task runs one at a time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_runbooks.state_file import ClusterStateFile


@dataclass
class NodeState:
    counters: dict[str, float] = field(default_factory=dict)
    seen_at_ms: int | None = None
    process_start_s: float | None = None
    increase_streak: int = 0  # consecutive sweeps in which a counter went up
    restart_run_id: str | None = None  # the last kafka_broker_restart run this sweep started
    decision_run_id: str | None = None  # the sweep run that last asked a person about this node

    def as_dict(self) -> dict[str, Any]:
        """The node's memory as the sweep persists it between runs."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeState:
        """Read the persisted memory; fields it does not know are ignored, counters come back as floats."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["counters"] = {str(k): float(v) for k, v in (known.get("counters") or {}).items()}
        return cls(**known)


class MetadataErrorStateStore(ClusterStateFile):
    kind = "metadata_errors"
    section = "nodes"

    def load(self) -> dict[int, NodeState]:
        """Every node's remembered state by node id (empty on the first sweep)."""
        return {int(k): NodeState.from_dict(v) for k, v in self.read_entries().items()}

    def save(self, states: dict[int, NodeState]) -> None:
        """Persist every node's state for the next sweep."""
        self.write_entries({str(k): s.as_dict() for k, s in sorted(states.items())})
