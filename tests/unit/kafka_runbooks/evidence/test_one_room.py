"""One room judges what the cluster says (issue #37): no decision reads the raw fields the
evidence rules judge anywhere but in ``kafka_runbooks.evidence``.

A decision made from one field of one answer (a fenced flag, a quorum timestamp, the last known
ELR) where the same answer or the node itself says otherwise is the fault class this room ends;
every runbook that wrote the rule again wrote it with its own threshold. The fields are built
where the answers are parsed (``model.py``, ``_kafka_python.py``) and judged in the room; any
other read of them, in any product folder, fails here, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
FOLDERS = ("include", "plugins", "dags", "spark_jobs")
ROOM = ROOT / "include" / "kafka_runbooks" / "evidence"
# where the answers are parsed into these fields: they may name them
BUILT = {
    ROOT / "include" / "kafka_runbooks" / "model.py",
    ROOT / "include" / "kafka_runbooks" / "_kafka_python.py",
    # the Spark snapshot's columns: written as read, judged by nobody on the way
    ROOT / "include" / "kafka_runbooks" / "snapshot.py",
}
# raw fields of Kafka's answers that only the room judges
RAW_FIELDS = {
    "fenced": "DescribeCluster's fenced flag (liveness: evidence.serving)",
    "is_fenced": "DescribeCluster's fenced flag (liveness: evidence.serving)",
    "last_caught_up_ms": "a DescribeQuorum timestamp (catch-up: evidence.QuorumView)",
    "last_fetch_ms": "a DescribeQuorum timestamp (catch-up: evidence.QuorumView)",
    "last_known_elr": "the last known ELR (cleanliness: evidence.committed_holders)",
    "elr": "the ELR (cleanliness: evidence.committed_holders)",
    "offline_replicas": "the controller's offline replicas (a failed log dir: evidence.judge_replica_dirs)",
}
# thresholds written in a runbook instead of read from the cluster
RAW_NAMES = {"RUNNING_NOW_MS", "MAX_LAG_MS"}


def offenders() -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ROOM in path.parents or path in BUILT:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.Attribute) and node.attr in RAW_FIELDS:
                    found.append(f"{where} reads .{node.attr}: {RAW_FIELDS[node.attr]}")
                elif isinstance(node, ast.Name) and node.id in RAW_NAMES:
                    found.append(f"{where} uses {node.id}: a threshold the cluster's settings give")
                elif isinstance(node, ast.keyword) and node.arg in ("is_fenced",):
                    found.append(f"{where} passes {node.arg}")
    return found


def test_no_decision_reads_a_raw_field_outside_the_evidence_room():
    assert offenders() == []


def test_the_check_finds_a_raw_read(tmp_path):
    sample = "def f(b, q):\n    return b.fenced or q.last_fetch_ms < MAX_LAG_MS\n"
    tree = ast.parse(sample)
    attrs = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    assert "fenced" in attrs and "last_fetch_ms" in attrs and "MAX_LAG_MS" in names
