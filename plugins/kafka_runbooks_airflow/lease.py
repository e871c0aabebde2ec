"""The per-cluster lease in Airflow: a reschedule sensor takes it (``sensors/lease.py``, with the
teardown task that gives it back), every disruptive step renews it.

Domain rules live in :mod:`kafka_runbooks.lease`; this module adds what only Airflow knows:
which run holds a lease is still going (``ti.get_dagrun_state``), the run's params (does
this run act at all? how long may its gate wait?), and the task states (wait in
reschedule mode, or fail naming the holder).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from kafka_runbooks.lease import (
    DEFAULT_TTL_S,
    HOLDER_ACTIVE,
    HOLDER_FINISHED,
    HOLDER_UNKNOWN,
    ClusterLease,
    Holder,
    LeaseLost,
)

log = logging.getLogger("kafka_runbooks.lease")

ON_HELD = ("wait", "fail")
ACTIVE_RUN_STATES = frozenset({"queued", "running"})
FINISHED_RUN_STATES = frozenset({"success", "failed"})


def lease_ttl_s() -> float:
    """``KAFKA_RUNBOOKS_LEASE_TTL_S`` (default 15 minutes): how long a lease holds unrenewed."""
    return float(os.environ.get("KAFKA_RUNBOOKS_LEASE_TTL_S") or DEFAULT_TTL_S)


def lease_store():
    """Where leases live: ``state/leases/`` of the configured data store: a local path, or
    ``s3://`` with conditional writes; ``gs://`` and ``abfs://`` are refused
    (``ConditionalWritesUnsupported``: their preconditions are not wired; production guide)."""
    from kafka_runbooks.storage import Records, store

    return Records(store(), "state/leases")


def lease_queue():
    """The runs that asked for each cluster's lease (``state/lease_queue/``): a run waiting for
    the lease is visible to the sweeps before it holds it."""
    from kafka_runbooks.lease import LeaseQueue
    from kafka_runbooks.storage import Records, store

    return LeaseQueue(Records(store(), "state/lease_queue"))


def join_lease_queue(dag_id: str, run_id: str, params: dict[str, Any]) -> None:
    """A run that will take the lease says so first (its input is valid, it may now wait)."""
    if lease_needed(dag_id, params):
        lease_queue().register(str(params["kafka_config_id"]), Holder(dag_id, run_id))


def lease_needed(dag_id: str, params: dict[str, Any]) -> bool:
    """Only a run that can change the cluster takes the lease: dry runs and read-only modes never wait."""
    if dag_id == "kafka_unclean_recovery":
        return params.get("mode") == "automated_recovery"
    return not bool(params.get("dry_run"))


def holder_state_from(ti) -> Any:
    """Ask Airflow (through the task's own API client) whether a holder's run still goes on."""

    def state(holder: Holder) -> str:
        """Whether the run holding the lease is active, finished or unknown to this Airflow (unknown: only
        expiry frees the lease)."""
        try:
            raw = ti.get_dagrun_state(holder.dag_id, holder.run_id)
        except Exception as exc:  # deleted run, rebuilt DB, another Airflow: only expiry frees it
            log.info("state of %s unknown (%s)", holder, exc)
            return HOLDER_UNKNOWN
        value = str(getattr(raw, "value", raw))  # an enum: str() would give "DagRunState.RUNNING"
        if value in FINISHED_RUN_STATES:
            return HOLDER_FINISHED
        return HOLDER_ACTIVE if value in ACTIVE_RUN_STATES else HOLDER_UNKNOWN

    return state


def cluster_lease(context, cluster: str) -> ClusterLease:
    """The lease of ``cluster`` for the run of ``context``."""
    return ClusterLease(
        lease_store(),
        cluster,
        Holder(context["dag"].dag_id, context["run_id"]),
        ttl_s=lease_ttl_s(),
        holder_state=holder_state_from(context["ti"]),
        logger=log,
    )


def renew_lease(context, cluster: str, hold_for_s: float | None = None) -> None:
    """Before every disruptive step: still ours? (renewed) Else fail the task, nothing is done."""
    from airflow.sdk.exceptions import AirflowFailException

    if not lease_needed(context["dag"].dag_id, dict(context["params"])):
        return
    try:
        cluster_lease(context, cluster).renew(hold_for_s)
    except LeaseLost as exc:
        raise AirflowFailException(str(exc)) from exc


def release_lease(context, cluster: str) -> dict[str, Any]:
    """The teardown: give the cluster back, whatever happened to the run."""
    released = cluster_lease(context, cluster).release()
    return {"cluster": cluster, "released": released}


def on_lease_held_param():
    """The manual runbooks' choice when another runbook holds the cluster."""
    from airflow.sdk import Param

    return Param(
        "wait",
        type="string",
        enum=list(ON_HELD),
        description="When another disruptive runbook (restart, unclean recovery, reassignment) holds this "
        "cluster's lease: 'wait' until it is released (in reschedule mode, no worker slot held), or 'fail' "
        "at once naming the run that holds it. Runs on other clusters never wait.",
    )
