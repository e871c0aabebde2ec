"""Benchmark: one auto-restart sweep over a Connect worker with about a hundred connectors.

    .venv/bin/python bench/connect_sweep.py --connect-url http://127.0.0.1:19080 \\
        --topic <an existing topic> [--connectors 100] [--failed 10] [--running 30]

Creates ``--connectors`` connectors on the worker: ``--failed`` file sinks whose target
folder does not exist (their task FAILS at start), ``--running`` file sources reading an
empty file (RUNNING), and the rest created then stopped (``PUT /connectors/{name}/stop``,
KIP-875: listed, no tasks; keeps one 512 MiB worker from holding a hundred producers). Then
runs the sweep three times and prints, for each, its wall time and HTTP calls: the first
restarts every failed connector (floor: 1 listing call + 1 ``GET /`` for the worker's
version + 1 call per due connector), the second finds none due (floor: 1 call). Deletes what it created at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kafka_runbooks.connect.autorestart import sweep_cluster
from kafka_runbooks.connect.client import ConnectClient
from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.connect.state import JsonStateStore

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--connect-url", required=True)
    ap.add_argument("--topic", required=True, help="an existing topic for the sinks and sources")
    ap.add_argument("--connectors", type=int, default=100)
    ap.add_argument("--failed", type=int, default=10)
    ap.add_argument("--running", type=int, default=30)
    args = ap.parse_args()
    if args.failed + args.running > args.connectors:
        ap.error("--failed + --running must not exceed --connectors")

    work = Path(tempfile.mkdtemp(prefix="kr-bench-connect-"))
    (work / "in.txt").write_text("")
    client = ConnectClient(args.connect_url, timeout_s=120)
    names: list[str] = []
    started = time.monotonic()
    try:
        for i in range(args.connectors):
            name = f"bench-{i:03d}"
            names.append(name)
            if i < args.failed:
                cfg = {"connector.class": SINK, "tasks.max": "1", "topics": args.topic}
                cfg["file"] = str(work / "missing" / f"{name}.txt")
            else:
                cfg = {"connector.class": SOURCE, "tasks.max": "1", "topic": args.topic}
                cfg["file"] = str(work / "in.txt")
            client.put_connector(name, cfg)
        for name in names[args.failed + args.running :]:
            resp = client._request("PUT", f"/connectors/{name}/stop")
            if resp.status_code not in (202, 204):
                raise SystemExit(f"stopping {name}: HTTP {resp.status_code} {resp.text}")
        deadline = time.monotonic() + 300
        while True:
            listing = {n: s for n, s in client.list_connectors().items() if n in names}
            failed = sum(1 for s in listing.values() if s.failed)
            if len(listing) == len(names) and failed == args.failed:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"worker not settled: {len(listing)} listed, {failed} failed")
            time.sleep(1)
        print(
            f"set-up: {len(names)} connectors ({args.failed} failed, {args.running} running, "
            f"{len(names) - args.failed - args.running} stopped) in {time.monotonic() - started:.1f}s"
        )

        store = JsonStateStore("bench", work / "state")
        policy = RestartPolicy()
        print(f"{'sweep':<28} {'wall s':>7} {'HTTP calls':>10} {'restarted':>9} {'floor':>6}")
        for label in ("1st (failed ones due)", "2nd (none due)", "3rd (none due)"):
            sweep_client = ConnectClient(args.connect_url, timeout_s=120)
            t0 = time.monotonic()
            report = sweep_cluster("bench", sweep_client, store, policy)
            wall = time.monotonic() - t0
            restarted = len(report["restarts"])
            floor = 1 + (1 + restarted if restarted else 0)
            print(f"{label:<28} {wall:>7.3f} {report['http_calls']:>10} {restarted:>9} {floor:>6}")
            sweep_client.close()
            if label.startswith("1st"):
                time.sleep(2)  # let the restarted tasks fail again
    finally:
        for name in names:
            client.delete_connector(name)
        client.close()


if __name__ == "__main__":
    main()
