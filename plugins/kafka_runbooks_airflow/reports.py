"""Publishing reports: a stable copy in the data store, findings in the log, metadata on the Asset event."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from kafka_runbooks import decisions, storage
from kafka_runbooks.health import HealthSettings, log_findings
from kafka_runbooks.paths import safe_name
from kafka_runbooks.snapshot_contract import META_FILE, REPORT_FILE

SNAPSHOT_SECTIONS = ("quorum", "log_dirs", "features")  # read by the sweep's Python side, not by Spark
HEALTH_DIR = "health"  # the health job's output folder, inside the snapshot's (the DAG passes it)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProposalContext:
    """What the proposal needs from the run: the sweep's settings (checked once by its
    ``health_settings`` task), its run id, its task instance."""

    settings: HealthSettings
    run_id: str
    ti: Any


def publish_health_report(
    snapshot_path: str, outlet_event=None, conn_id: str | None = None, proposal: ProposalContext | None = None
) -> dict:
    """The health job's report (``<snapshot>/health/report.json``, in the data store: the job may
    have run on another worker or a Spark cluster) published where the Kafka page reads it; with a
    ``proposal`` context, the balance judged against the rebalance's targets and the sweep's decision
    on a kafka_rebalance run go in the report (the page shows them) and in the result."""
    report_file = storage.locate(snapshot_path) / HEALTH_DIR / REPORT_FILE
    if not report_file.exists():
        raise FileNotFoundError(f"the health job wrote no report at {report_file}")
    report = json.loads(report_file.read_text())
    report.update(snapshot_sections(snapshot_path))
    if proposal is not None:
        from kafka_runbooks.health import judge_balance

        report["balance"] = judge_balance(report, proposal.settings.targets()).as_dict()
    text = json.dumps(report)
    log_findings(report, logger=log)
    started = propose_from_report(report, conn_id, proposal)
    if conn_id:
        report["pending_restores"] = report_pending_restores(conn_id)
    store = storage.store()
    store.write_text("reports/cluster_health/latest.json", text)
    if conn_id:  # the Kafka page shows the latest report of every connection
        report["kafka_config_id"] = conn_id
        store.write_text(
            f"reports/cluster_health/by_connection/{safe_name(conn_id)}.json", json.dumps(report)
        )
    summary = {
        "report": str(report_file),
        "latest": store.url_of("reports/cluster_health/latest.json"),
        "cluster_id": report.get("cluster_id"),
        "partitions": report.get("partitions"),
        "counts": report.get("counts", {}),
    }
    if outlet_event is not None:
        outlet_event.extra = summary
    log.info("health report published: %s", json.dumps(summary))
    return {
        **summary,
        "offline": report.get("offline", []),
        "under_replicated": report.get("under_replicated", []),
        **started,
    }


def propose_from_report(report: dict, conn_id: str | None, proposal: ProposalContext | None) -> dict:
    """The sweep's decision on a kafka_rebalance run (recorded either way, and put in the report for
    the Kafka page): the trigger task's ``rebalance_trigger``, ``rebalance_run_id``, ``rebalance_conf``."""
    if proposal is None or not conn_id:
        return {"rebalance_trigger": False, "rebalance_run_id": None, "rebalance_conf": {}}
    from kafka_runbooks_airflow.health import propose

    decided = propose(report, conn_id, proposal.run_id, proposal.settings, proposal.ti)
    report["rebalance_proposal"] = decided.as_dict()
    return {
        "rebalance_trigger": decided.start,
        "rebalance_run_id": decided.run_id,
        "rebalance_conf": decided.conf,
    }


def snapshot_sections(snapshot_path: str) -> dict:
    """The quorum and log-dir sections the snapshot wrote beside its Parquet files (meta.json):
    small JSON the report carries as it is, without a round through Spark. A snapshot without
    them (taken before they existed) adds nothing, and the report says nothing of them."""
    meta_file = storage.locate(snapshot_path) / META_FILE
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    return {key: meta[key] for key in SNAPSHOT_SECTIONS if key in meta}


def report_pending_restores(conn_id: str) -> list[str] | str:
    """Replica orders an unclean recovery left changed on this cluster, as a WARNING decision
    record when there are any (the next run of the runbook restores them first); a journal
    that cannot be read is said to be unknown, never "none"."""
    from kafka_runbooks_airflow.unclean import pending_restores

    try:
        pending: list[str] | str = sorted(pending_restores(conn_id))
    except Exception as exc:  # the store unreadable: unknown, with why
        pending = f"unknown: {type(exc).__name__}: {exc}"
    if pending:
        decisions.record(
            "health",
            "replica orders left changed by an unclean recovery",
            "a kafka_unclean_recovery run died between its reorder and its restore; the next run of "
            "that runbook on this cluster restores them first (no new plan or approval needed)",
            subject=conn_id,
            observed={"pending_restores": pending if isinstance(pending, str) else pending[:50]},
            logger=log,
            level=logging.WARNING,
        )
    return pending
