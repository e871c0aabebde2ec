"""Where the auto-restart sweep keeps each connector's restart count and last restart time.

A JSON file per Connect cluster under the runbooks' data dir
(``state/connect_autorestart/<conn_id>.json`` in the data store), not an Airflow
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

from kafka_runbooks.connect.policy import RestartState
from kafka_runbooks.state_file import ClusterStateFile


class JsonStateStore(ClusterStateFile):
    """Per-connector :class:`RestartState` of one Connect cluster, in one JSON file."""

    kind = "connect_autorestart"
    section = "connectors"

    def load(self) -> dict[str, RestartState]:
        """Every connector's remembered restart state by name (empty on the first sweep)."""
        return {name: RestartState.from_dict(entry) for name, entry in self.read_entries().items()}

    def save(self, states: dict[str, RestartState]) -> None:
        """Persist every connector's restart state for the next sweep."""
        self.write_entries({name: s.as_dict() for name, s in sorted(states.items())})
