"""The health sweep's settings and its proposal: glue between ``kafka_cluster_health`` and the library.

What to judge and whether to start a run is decided in ``kafka_runbooks.health`` (Airflow-free);
here the settings are read (run params > Variable ``kafka_cluster_health`` > environment
``KAFKA_RUNBOOKS_HEALTH_<KEY>`` > defaults, like the failed-broker sweep's), the run the sweep last
started on a cluster is remembered in the data store (``state/health_rebalance/<conn>.json``: it
survives a scheduler restart, and a queued run that holds no lease yet still counts as active), and
the reassigning runs on the cluster are asked of Airflow.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from kafka_runbooks import storage
from kafka_runbooks.health import (
    HealthSettings,
    LastProposal,
    ProposalInputs,
    RebalanceProposal,
    judge_balance,
    propose_rebalance,
)
from kafka_runbooks.paths import safe_name
from kafka_runbooks.rebalance import DEFAULT_BYTES_SPREAD_PERCENT, DEFAULT_SPREAD
from kafka_runbooks.settings import layered_settings

HEALTH_VARIABLE = "kafka_cluster_health"
HEALTH_ENV_PREFIX = "KAFKA_RUNBOOKS_HEALTH_"
REBALANCE_DAG_ID = "kafka_rebalance"
HEALTH_DEFAULTS: dict[str, Any] = {
    # like the failed-broker sweep's start_log_dir_failure: off, the sweep reports only
    "start_rebalance": False,
    # kafka_rebalance's own default targets (imported): the sweep proposes what the rebalance would do
    "max_replica_spread": DEFAULT_SPREAD,
    "max_leader_spread": DEFAULT_SPREAD,
    "max_bytes_spread_percent": DEFAULT_BYTES_SPREAD_PERCENT,
    # null: 3, or the live brokers when fewer (spark_jobs/cluster_health.py)
    "min_replication_factor": None,
    # a proposal rejected at its gate is not asked again before this
    "retrigger_after_minutes": 1440,
}

log = logging.getLogger("kafka_runbooks.health")


def health_settings(params: dict[str, Any], variable: str | None) -> dict[str, Any]:
    """Run params (when not null) > Variable ``kafka_cluster_health`` (JSON) > env
    ``KAFKA_RUNBOOKS_HEALTH_<KEY>`` (JSON values) > defaults (the sweeps' one rule), checked
    (``HealthSettings``) before any cluster is read; in their XCom form, for each cluster's tasks."""
    given = layered_settings(
        HEALTH_DEFAULTS, params, variable, variable_name=HEALTH_VARIABLE, env_prefix=HEALTH_ENV_PREFIX
    )
    return HealthSettings.from_given(given).as_dict()


def typed_settings(xcom: dict[str, Any]) -> HealthSettings:
    """The ``health_settings`` task's XCom as the typed settings, once per publish task (checked by
    the same rule: the XCom is JSON, and the checks are cheap)."""
    return HealthSettings.from_given(xcom)


def _last_key(conn_id: str) -> str:
    return f"state/health_rebalance/{safe_name(conn_id)}.json"


def last_proposal(conn_id: str) -> LastProposal | None:
    """The kafka_rebalance run this sweep last started on the cluster (None: never)."""
    text = storage.store().read_text(_last_key(conn_id))
    if not text:
        return None
    raw = json.loads(text)
    return LastProposal(str(raw["run_id"]), int(raw["started_ms"]))


def propose(
    report: dict[str, Any], conn_id: str, run_id: str, settings: HealthSettings, ti
) -> RebalanceProposal:
    """Judge the report's balance against the targets and decide the proposal (recorded either way);
    a started run is remembered before the trigger task starts it."""
    from kafka_runbooks_airflow.failed_broker import reassignment_active_on
    from kafka_runbooks_airflow.lease import ACTIVE_RUN_STATES

    last = last_proposal(conn_id)
    if last is not None and _run_state(ti, last.run_id) is None:
        last = None  # never created (its trigger failed, e.g. the DAG paused): nothing to wait for
    inputs = ProposalInputs(
        balance=judge_balance(report, settings.targets()),
        report=report,
        enabled=settings.start_rebalance,
        targets=settings.targets(),
        conn_id=conn_id,
        run_id=f"health__{safe_name(conn_id)}__{safe_name(run_id)}",
        last=last,
        now_ms=int(time.time() * 1000),
        retrigger_after_s=settings.retrigger_after_s,
    )

    def active() -> list[str]:
        """Reassignments running on the cluster now, including this sweep's last rebalance run while
        Airflow says it is active."""
        running = reassignment_active_on(ti, conn_id)
        own = f"{REBALANCE_DAG_ID}/{last.run_id}" if last is not None else None
        if own and _run_state(ti, last.run_id) in ACTIVE_RUN_STATES and own not in running:
            running.append(own)
        return running

    proposal = propose_rebalance(inputs, active, logger=log)
    if proposal.start:
        storage.store().write_text(
            _last_key(conn_id), json.dumps({"run_id": proposal.run_id, "started_ms": inputs.now_ms})
        )
    return proposal


def _run_state(ti, run_id: str) -> str | None:
    """The state of the sweep's last kafka_rebalance run; None when Airflow has no such run."""
    try:
        raw = ti.get_dagrun_state(REBALANCE_DAG_ID, run_id)
    except Exception as exc:  # never created, or deleted
        log.info("run %s/%s not found (%s)", REBALANCE_DAG_ID, run_id, exc)
        return None
    return str(getattr(raw, "value", raw))
