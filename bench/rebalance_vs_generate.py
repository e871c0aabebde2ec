"""Benchmark: our rebalance plans beside ``kafka-reassign-partitions.sh --generate`` on one real cluster.

    flock /tmp/kr-stack.lock .venv/bin/python bench/rebalance_vs_generate.py [--home .stack/bench-E]
        [--port-base 27000] [--keep]

Starts a local stack (``LocalStack``, as ``kstack`` does) of six brokers in three racks (1, 4 in
rack-a; 2, 5 in rack-b; 3, 6 in rack-c), one controller, no Connect, on its own port base, and
creates a skewed cluster: ``skew-old`` (24 partitions, RF 3) only on brokers 1-3, as it was
before brokers 4-6 were added, and ``skew-hot`` (12 partitions, RF 2) mostly on brokers 1 and
2. Then proposes, for the same cluster and without executing anything:

* ``--generate``: Kafka 4.3.1's ``ReassignPartitionsCommand`` (the class the script runs, from
  the stack's own jars) with ``--broker-list 1,2,3,4,5,6`` over both topics, rack-aware;
* ours: ``spark_jobs/failed_broker_plan.py --rebalance add-brokers --new-brokers 4,5,6`` and
  ``--rebalance full``, both with a target spread of 1, on a snapshot the runbook's own code
  takes (in-process Spark, as the integration tests run it).

Prints per proposal: replica moves (replicas that get a new broker: each copies a partition),
leader changes (partitions whose preferred leader changes), partitions touched, the most
replicas any one broker receives (its copies are what the move waits on under a per-broker
throttle), replicas and preferred leaders per broker after and their spread, and partitions
left on fewer racks; beside our plans, the planner's lower bound of replica moves.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.snapshot import write_snapshot
from kafka_runbooks_dev.helpers import create_topic, wait_until
from kafka_runbooks_dev.localstack import LocalStack
from kafka_runbooks_dev.localstack.stack import ensure_jars, kafka_classpath
from kafka_runbooks_dev.localstack.topology import Topology

ROOT = Path(__file__).resolve().parents[1]
RACKS = ("rack-a", "rack-b", "rack-c")
BROKERS = [1, 2, 3, 4, 5, 6]
RACK_OF = {b: RACKS[(b - 1) % 3] for b in BROKERS}
GENERATE = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def skewed_cluster() -> dict[str, dict[int, list[int]]]:
    """Topic -> partition -> replicas: brokers 1-3 hold everything of ``skew-old``, 1 and 2 most
    of ``skew-hot``; brokers 4-6 hold two replicas in all."""
    old = {p: [1 + (p + i) % 3 for i in range(3)] for p in range(24)}
    hot = {p: [[1, 2], [2, 1], [1, 5], [2, 4]][p % 4] for p in range(12)}
    return {"skew-old": old, "skew-hot": hot}


def _all_led(state, expected: int):
    """The state once every partition of the topics is there with a leader, else None."""
    led = [p for p in state.partitions if p.leader is not None and p.leader >= 0]
    return state if len(led) == expected else None


def generate(stack: LocalStack, topics: list[str], work: Path) -> dict[tuple[str, int], list[int]]:
    """``kafka-reassign-partitions --generate``'s proposed assignment (every partition of the topics)."""
    spec = work / "topics-to-move.json"
    spec.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
    argv = ["java", "-cp", kafka_classpath(ensure_jars()), GENERATE]
    argv += ["--bootstrap-server", stack.bootstrap_servers, "--topics-to-move-json-file", str(spec)]
    argv += ["--broker-list", ",".join(map(str, BROKERS)), "--generate"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    return {(p["topic"], p["partition"]): list(p["replicas"]) for p in proposed["partitions"]}


def planner():
    """The planning job as a module (run in-process on a local Spark session)."""
    path = ROOT / "spark_jobs" / "failed_broker_plan.py"
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_bench", path)
    job = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = job  # its dataclasses look their module up there
    spec.loader.exec_module(job)
    return job


def ours(job, state, mode: str, work: Path) -> tuple[dict[tuple[str, int], list[int]], dict]:
    """Our planner's targets (replica moves and leader-only reorders) and its summary."""
    snapshot, out = write_snapshot(state, work / f"snapshot-{mode}"), work / f"plan-{mode}"
    argv = ["--snapshot", str(snapshot), "--out", str(out), "--rebalance", mode]
    argv += ["--max-replica-spread", "1", "--max-leader-spread", "1"]
    argv += ["--new-brokers", "4,5,6"] if mode == "add-brokers" else []
    if job.run(job.get_spark(), argv) != 0:
        raise SystemExit(f"our {mode} plan failed: {(out / 'error.json').read_text()}")
    summary = json.loads((out / "summary.json").read_text())
    targets = {(m["topic"], m["partition"]): m["to"] for m in summary["moves"]}
    targets |= {(m["topic"], m["partition"]): m["to"] for m in summary["leader_moves"]}
    return targets, summary


def figures(current: dict[tuple[str, int], list[int]], proposed: dict[tuple[str, int], list[int]]) -> dict:
    """What a proposal costs and where it leaves the cluster, from the two assignments alone."""
    after = {k: list(proposed.get(k, r)) for k, r in current.items()}
    incoming = Counter(b for k, r in after.items() for b in set(r) - set(current[k]))
    replicas = Counter(b for r in after.values() for b in r)
    leaders = Counter(r[0] for r in after.values())
    racks = sum(
        1 for k, r in after.items() if len({RACK_OF[b] for b in r}) < len({RACK_OF[b] for b in current[k]})
    )
    return {
        "replica moves": sum(incoming.values()),
        "leader changes": sum(1 for k, r in after.items() if r[0] != current[k][0]),
        "partitions touched": sum(1 for k, r in after.items() if r != current[k]),
        "max incoming per broker": max(incoming.values(), default=0),
        "replicas per broker": " ".join(str(replicas[b]) for b in BROKERS),
        "replica spread": max(replicas[b] for b in BROKERS) - min(replicas[b] for b in BROKERS),
        "preferred leaders per broker": " ".join(str(leaders[b]) for b in BROKERS),
        "leader spread": max(leaders[b] for b in BROKERS) - min(leaders[b] for b in BROKERS),
        "partitions on fewer racks": racks,
    }


def table(columns: dict[str, dict]) -> str:
    """One row per figure, one column per proposal (Markdown)."""
    names = list(columns)
    rows = [f"| figure | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    for figure in next(iter(columns.values())):
        rows.append(f"| {figure} | {' | '.join(str(columns[n].get(figure, '-')) for n in names)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default=str(ROOT / ".stack" / "bench-E"), help="the stack's folder (wiped)")
    parser.add_argument("--port-base", type=int, default=27000)
    parser.add_argument("--keep", action="store_true", help="leave the stack running")
    args = parser.parse_args()
    topology = Topology(brokers=6, controllers=1, racks=RACKS, connect=False, port_base=args.port_base)
    stack = LocalStack(home=args.home, topology=topology)
    stack.destroy()
    started = time.monotonic()
    stack.start()
    try:
        print(f"stack of 6 brokers in 3 racks ready in {time.monotonic() - started:.0f}s")
        cluster = skewed_cluster()
        for topic, assignment in cluster.items():
            create_topic(stack.bootstrap_servers, topic, assignment=assignment)
        expected = sum(len(a) for a in cluster.values())
        with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}, timeout_s=30) as admin:
            state = wait_until(
                lambda: _all_led(admin.read_state(topics=list(cluster)), expected), 60, 1, "the topics"
            )
        current = {(p.topic, p.partition): list(p.replicas) for p in state.partitions}
        with tempfile.TemporaryDirectory(prefix="bench-vs-generate-") as tmp:
            columns = {
                "current": figures(current, {}),
                "--generate": figures(current, generate(stack, list(cluster), Path(tmp))),
            }
            job = planner()
            for mode in ("add-brokers", "full"):
                targets, summary = ours(job, state, mode, Path(tmp))
                columns[f"ours {mode}"] = figures(current, targets) | {
                    "lower bound of replica moves": summary["spread"]["replicas"]["lower_bound_moves"],
                    "target reached": summary["reached"],
                }
        print(table(columns))
    finally:
        if not args.keep:
            stack.stop()


if __name__ == "__main__":
    main()
