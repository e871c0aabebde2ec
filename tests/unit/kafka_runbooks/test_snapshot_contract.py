"""The snapshot contract: the runbooks and the self-contained Spark jobs agree on names and columns.

The jobs are submitted as single files (no ``--py-files``), so each carries a copy of the
block in ``kafka_runbooks/snapshot_contract.py``; these tests fail when a copy drifts, when
a job names a contract file by a string literal instead of the block's constant, and when
what the writer writes is not what the contract says.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafka_runbooks import snapshot_contract as contract
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.snapshot import write_snapshot

ROOT = Path(__file__).resolve().parents[3]
JOBS = [ROOT / "spark_jobs" / "cluster_health.py", ROOT / "spark_jobs" / "failed_broker_plan.py"]
CONTRACT_SOURCE = Path(contract.__file__).read_text()
FILE_NAMES = {
    contract.REPLICAS_FILE,
    contract.BROKERS_FILE,
    contract.META_FILE,
    contract.PLAN_FILE,
    contract.SUMMARY_FILE,
    contract.ERROR_FILE,
    contract.REPORT_FILE,
    contract.PARTITIONS_FILE,
}


def test_the_contract_has_one_block_that_imports_nothing():
    block = contract.block(CONTRACT_SOURCE)
    assert block.startswith(contract.BEGIN) and block.endswith(contract.END)
    tree = ast.parse(block)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert contract.block("no markers here") == ""


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.name)
def test_each_spark_job_carries_the_contract_verbatim(job: Path):
    copy = contract.block(job.read_text())
    assert copy, f"{job.name} has no snapshot contract block"
    assert copy == contract.block(CONTRACT_SOURCE), (
        f"{job.name}'s snapshot contract differs from include/kafka_runbooks/snapshot_contract.py: "
        "change it there and copy the block between the marker lines into every job"
    )


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.name)
def test_no_spark_job_names_a_contract_file_outside_the_block(job: Path):
    source = job.read_text()
    rest = source.replace(contract.block(source), "")
    literals = [
        n.value for n in ast.walk(ast.parse(rest)) if isinstance(n, ast.Constant) and n.value in FILE_NAMES
    ]
    assert literals == [], f"{job.name} names {literals} by a literal: use the contract's constants"
    assert "def load_snapshot" not in rest and "class PlanImpossible" not in rest and "def _join" not in rest


# The one function allowed to write with the driver's own calls: the plan job's write of a URL
# that Hadoop itself resolves to its local file system (the driver's disk is then the store's
# disk either way; Hadoop's own write forked chmod for every one of thousands of chunk files).
# It is reached only through _driver_local, checked below.
DRIVER_LOCAL_WRITERS = {"_write_local"}


def _without_driver_local_writers(tree: ast.Module) -> ast.Module:
    tree.body = [
        n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in DRIVER_LOCAL_WRITERS)
    ]
    return tree


def test_the_driver_writes_itself_only_what_hadoop_resolves_to_its_local_file_system():
    """``_write_local`` is called in one place, on the path ``_driver_local`` gave (None: Hadoop)."""
    source = (ROOT / "spark_jobs" / "failed_broker_plan.py").read_text()
    calls = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "_write_local"
    ]
    assert [ast.unparse(c.args[0]) for c in calls] == ["local"]
    assert "local = _driver_local(spark, url)" in source and "if local is None:" in source


def _local_file_calls(source: str) -> list[str]:
    """Calls that touch the driver's own disk instead of going through Hadoop's FileSystem."""
    found = []
    for node in ast.walk(_without_driver_local_writers(ast.parse(source))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        local = name in ("open", "io.open", "pathlib.Path", "Path") or name.startswith(("os.", "shutil."))
        if local and name != "os.environ.get":
            found.append(name)
    return sorted(found)


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.name)
def test_no_spark_job_reads_or_writes_a_driver_local_file_itself(job: Path):
    """An output on the driver's disk is lost to the next task on another worker: the block's
    Hadoop FileSystem helpers are the only way in and out."""
    assert _local_file_calls(job.read_text()) == [], f"{job.name}: use read_text/write_text/remove/exists"


def test_the_check_finds_a_driver_local_write():
    rest = (
        'os.makedirs(out)\nwith open(out + "/report.json", "w") as f:\n    f.write(text)\nos.replace(a, b)\n'
    )
    assert _local_file_calls(rest) == ["open", "os.makedirs", "os.replace"]


def test_the_check_finds_a_literal_file_name():
    rest = 'x = spark.read.parquet(_join(snapshot, "replicas.parquet"))\n'
    assert [n.value for n in ast.walk(ast.parse(rest)) if isinstance(n, ast.Constant)] == ["replicas.parquet"]


def test_the_writer_writes_the_contracts_files_and_columns(tmp_path):
    brokers = {1: Broker(broker_id=1, rack="a"), 2: Broker(broker_id=2, fenced=True)}
    state = ClusterState(
        cluster_id="c",
        brokers=brokers,
        quorum=None,
        partitions=[PartitionState("t", 0, 1, 3, (1, 2), (1,))],
    )
    out = write_snapshot(state, tmp_path / "snap", "localhost:9092")
    assert {p.name for p in out.iterdir()} == {
        contract.REPLICAS_FILE,
        contract.BROKERS_FILE,
        contract.META_FILE,
    }
    for name, columns in (
        (contract.REPLICAS_FILE, contract.REPLICA_COLUMNS),
        (contract.BROKERS_FILE, contract.BROKER_COLUMNS),
    ):
        schema = pq.read_schema(out / name)
        assert [(f.name, str(f.type)) for f in schema] == list(columns)
    assert json.loads((out / contract.META_FILE).read_text())["cluster_id"] == "c"


def test_check_plan_reads_only_contract_columns():
    from kafka_runbooks.failed_broker.plan import CHECKED_COLUMNS, PlanImpossible

    assert set(CHECKED_COLUMNS) <= {c for c, _ in contract.REPLICA_COLUMNS}
    assert PlanImpossible is contract.PlanImpossible
