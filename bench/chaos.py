"""The fault campaign (issue #37): every disruptive runbook under seeded random faults, judged from outside.

    .venv/bin/python bench/chaos.py [--runbooks restart,heal,...] [--seeds 1-20] [--results FILE]
        [--replay FILE:LINE]

Starts its own stack (KR_CHAOS_PORT_BASE, default 17000) and Airflow, then runs each runbook once
per seed: the schedule a seed draws (kafka_runbooks_dev.chaos.schedule) is a set of faults at
random points of the run (kill -9, SIGSTOP, a clean stop of any node, the task process killed,
the scheduler restarted, a Clear, the gate answered early, late, twice or rejected) while an
acks=all producer writes and a watcher polls DescribeQuorum and the partitions every 200 ms.
Every schedule's record goes to the results file (JSON lines); the summary prints, per runbook,
the schedules run and the violations with their seeds. ``--replay FILE:LINE`` runs a recorded
schedule again, exactly as recorded. Exits 1 when any invariant was broken.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

from kafka_runbooks_dev.chaos import environment
from kafka_runbooks_dev.chaos.runner import Campaign
from kafka_runbooks_dev.chaos.scenarios import SCENARIOS
from kafka_runbooks_dev.chaos.schedule import Schedule
from kafka_runbooks_dev.localstack.stack import PROJECT_ROOT


def seeds(text: str) -> list[int]:
    """'1-20' or '3,7,9' or a mix."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def replay_of(spec: str) -> tuple[str, int, Schedule]:
    """The schedule recorded on line ``LINE`` of ``FILE``."""
    path, _, line = spec.rpartition(":")
    record = json.loads(Path(path).read_text().splitlines()[int(line) - 1])
    return record["runbook"], record["seed"], Schedule.from_dict(record["schedule"])


def summary(results: list) -> str:
    """Per runbook: schedules run, violations and their seeds."""
    by = defaultdict(list)
    for r in results:
        by[r.runbook].append(r)
    lines = []
    for runbook, rs in sorted(by.items()):
        bad = [r for r in rs if not r.ok]
        lines.append(f"{runbook}: {len(rs)} schedule(s), {len(bad)} with violations")
        for r in bad:
            broken = {k: v for k, v in r.violations.items() if v}
            lines.append(f"  seed {r.seed}: {json.dumps(broken)[:1500]}")
    return "\n".join(lines)


def _plan(args) -> dict[str, list]:
    """(runbook, seed, schedule or None) per stack topology, in the order they will run."""
    if args.replay:
        runbook, seed, schedule = replay_of(args.replay)
        return {SCENARIOS[runbook].topology: [(runbook, seed, schedule)]}
    plan: dict[str, list] = defaultdict(list)
    for seed in seeds(args.seeds):
        for runbook in args.runbooks.split(","):
            plan[SCENARIOS[runbook].topology].append((runbook, seed, None))
    return plan


def _stop_on_sigterm() -> None:
    """SIGTERM ends the campaign like Ctrl-C: the stack and Airflow it started are stopped."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; 0 when no invariant was broken."""
    _stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runbooks", default=",".join(SCENARIOS))
    parser.add_argument("--seeds", default="1-5")
    parser.add_argument("--results", default=str(PROJECT_ROOT / ".stack" / "chaos-results.jsonl"))
    parser.add_argument("--replay")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    done: list = []
    started = time.monotonic()
    for topology, runs in _plan(args).items():
        env = environment.start(topology)
        campaign = Campaign(env, Path(args.results))
        try:
            for runbook, seed, schedule in runs:
                done.append(campaign.run(runbook, seed, schedule))
                verdict = "ok" if done[-1].ok else "VIOLATION"
                print(f"{runbook} seed {seed}: {verdict} ({done[-1].seconds} s)", flush=True)
        finally:
            env.stop()
    print(summary(done))
    print(f"{len(done)} schedule(s) in {time.monotonic() - started:.0f} s; results in {args.results}")
    return 0 if all(r.ok for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
