"""Where each run's state lives in the data store: one home for every run's folder layout.

The reassignment keeps one folder per run (``reassign/<dag>/<run>/``: its execution or
adoption state and the cluster the run belongs to) and the stop requests beside them
(``reassign/<dag>/stop/``); the rolling restart keeps its roll state under
``restart/<dag>/<run>/``. A run's tasks may run on different workers, so the data store
(``kafka_runbooks.storage``), not a worker's disk, holds them.

The DAGs' glue writes these files, the gate and the sensors read them: this module imports
nothing from either, so neither has to import the other to find a run's state.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks import storage
from kafka_runbooks.failed_broker.stop import request_path
from kafka_runbooks.fleet import config_id_of
from kafka_runbooks.paths import safe_name
from kafka_runbooks.storage import StorePath

REASSIGN_DAG_ID = "kafka_failed_broker_reassignment"
EXEC_STATE = "exec-state.json"
ADOPT_STATE = "adopt-state.json"
CLUSTER_MARK = "cluster.json"  # which cluster (connection id) a run's state files belong to


# ------------------------------------------------------------------ reassignment runs


def run_dir(dag_id: str, run_id: str) -> StorePath:
    """The run's folder in the data store (on a local store: ``<data dir>/reassign/<dag>/<run>``)."""
    return runbook_dir(dag_id) / safe_name(run_id)


def runbook_dir(dag_id: str) -> StorePath:
    """The runbook's state folder: one folder per run, and ``stop/`` for stop requests."""
    return StorePath(storage.store(), f"reassign/{safe_name(dag_id)}")


def stop_request_file(dag_id: str, cluster: str) -> StorePath:
    """The stop request of a Kafka connection, in the runbook's state folder beside the runs."""
    return request_path(runbook_dir(dag_id), cluster)


def mark_cluster(folder: StorePath, cluster: str) -> None:
    """Name the run's cluster in its folder: runs on several clusters share the runbook's folder."""
    (folder / CLUSTER_MARK).write_text(json.dumps({"kafka_config_id": cluster}))


def run_cluster(folder: StorePath) -> str | None:
    """The cluster a run folder belongs to; None for a folder written before clusters were named."""
    try:
        return config_id_of(json.loads((folder / CLUSTER_MARK).read_text()))
    except FileNotFoundError:
        return None


def state_files(dag_id: str, cluster: str | None = None) -> list[StorePath]:
    """The runbook's state files, of ``cluster`` only when given (unmarked old runs count for any:
    before clusters were named, one run at a time was the rule)."""
    root = runbook_dir(dag_id)
    depth = root.key.count("/") + 2  # reassign/<dag>/<run>/<file>
    found = [p for p in root.files() if p.key.count("/") == depth]
    paths = [p for p in found if p.name == EXEC_STATE] + [p for p in found if p.name == ADOPT_STATE]
    if cluster is None:
        return paths
    return [p for p in paths if run_cluster(p.parent) in (None, cluster)]


# ------------------------------------------------------------------ rolling restart runs


def roll_state_key(dag_id: str, run_id: str) -> str:
    """The run's roll state in the data store: the plan and every node's phase."""
    return f"restart/{safe_name(dag_id)}/{safe_name(run_id)}/roll-state.json"


def roll_state_file(dag_id: str, run_id: str) -> Path | str:
    """Where the roll state is: a local path, or the object's URL."""
    store = storage.store()
    key = roll_state_key(dag_id, run_id)
    if store.is_local:
        store.local_path(key).parent.mkdir(parents=True, exist_ok=True)
        return store.local_path(key)
    return store.url_of(key)


def read_roll_state(dag_id: str, run_id: str) -> str | None:
    """The roll state's text; None when the run has none (yet)."""
    return storage.store().read_text(roll_state_key(dag_id, run_id))


def write_roll_state(dag_id: str, run_id: str, text: str) -> None:
    """Replace it whole (a worker killed mid-write leaves the previous version)."""
    storage.store().write_text(roll_state_key(dag_id, run_id), text)
