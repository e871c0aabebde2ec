"""Publishing reports: a stable copy on disk, findings in the log, metadata on the Asset event."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from kafka_runbooks.health import log_findings
from kafka_runbooks.paths import artifact_dir, safe_name
from kafka_runbooks.state_file import write_atomic

log = logging.getLogger(__name__)


def publish_health_report(snapshot_path: str, outlet_event=None, conn_id: str | None = None) -> dict:
    report_file = Path(snapshot_path) / "health" / "report.json"
    if not report_file.exists():
        raise FileNotFoundError(f"the health job wrote no report at {report_file}")
    report = json.loads(report_file.read_text())
    log_findings(report, logger=log)
    latest = artifact_dir("reports", "cluster_health") / "latest.json"
    shutil.copyfile(report_file, latest)
    if conn_id:  # the Kafka page shows the latest report of every connection
        report["kafka_conn_id"] = conn_id
        write_atomic(
            artifact_dir("reports", "cluster_health", "by_connection") / f"{safe_name(conn_id)}.json",
            json.dumps(report),
        )
    summary = {
        "report": str(report_file),
        "latest": str(latest),
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
    }
