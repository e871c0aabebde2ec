"""``kstack``: start, stop and break the local Kafka stack.

    kstack start | stop | destroy | status [--json]
    kstack kill NODE | stop-node NODE | start-node NODE [--wait] | running NODE
    kstack topics [--records N] | fail-connector [--name NAME]
    kstack log-recovery NODE [--segments N] [--no-wait] [--keep-topic]
    kstack fail-log-dir NODE [--dir N]

NODE is a node id (``3``, ``9001``) or name (``broker-3``, ``controller-9001``, ``connect``).
``running`` exits 0 when the node's process is alive, 1 when it is not. ``topics`` creates the
demo's topics with data; ``fail-connector`` creates a Connect file sink whose task fails (an
incident for the Connect runbooks); ``log-recovery`` kills a broker with thousands of log
segments to recover and starts it again, then follows its recovery through its JMX exporter
(as the restart runbook sees it) until it is RUNNING and deletes the topic it filled;
``fail-log-dir`` fails a live broker's log dir N (default 2) as a dead disk does, on a stack
started with ``KR_STACK_LOG_DIRS=2`` (the broker lives on, the dir goes offline: the incident of
``kafka_log_dir_failure``). ``KR_STACK_DYNAMIC_QUORUM=1`` (with ``KR_STACK_SPARE_CONTROLLERS=1``)
formats a KIP-853 dynamic quorum with a spare controller to start as an observer
(``kstack start-node controller-9004``): the set-up of ``kafka_controller_replace``.
``KR_KAFKA_VERSION`` (e.g. ``3.9.2``, or a line: ``4.0``) picks the Kafka release of a new stack
(:mod:`.jars`); ``start`` and ``status`` name it and what of it Maven Central did not serve.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from kafka_runbooks_dev.localstack import jars
from kafka_runbooks_dev.localstack.stack import LocalStack, StackError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kstack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", help="stack folder (default: $KR_STACK_DIR or .stack/demo)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("start", help="start every node and wait until all are ready")
    sub.add_parser("stop", help="stop every node cleanly")
    sub.add_parser("destroy", help="stop every node and delete the stack's data")
    st = sub.add_parser("status", help="list nodes, whether they run, their ports")
    st.add_argument("--json", action="store_true")
    for name, text in (
        ("kill", "kill -9 a node"),
        ("stop-node", "stop a node cleanly (SIGTERM)"),
        ("start-node", "start a stopped node"),
        ("running", "exit 0 if the node runs, 1 if not"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("node")
        if name == "start-node":
            p.add_argument("--wait", action="store_true", help="wait until it is ready")
    tp = sub.add_parser("topics", help="create the demo topics (demo-orders, demo-payments) with data")
    tp.add_argument("--records", type=int, default=2000, help="records per topic (default 2000)")
    fc = sub.add_parser("fail-connector", help="create a Connect file sink whose task fails")
    fc.add_argument("--name", default="demo-failing-sink")
    lr = sub.add_parser("log-recovery", help="kill -9 a broker with many segments to recover, start it again")
    lr.add_argument("node")
    lr.add_argument("--segments", type=int, default=None, help="segments to recover (default 4000)")
    lr.add_argument("--no-wait", action="store_true", help="return once it is started, recovering")
    lr.add_argument("--keep-topic", action="store_true", help="keep its topic (a next run reuses it)")
    fd = sub.add_parser("fail-log-dir", help="fail a live broker's log dir as a dead disk does")
    fd.add_argument("node")
    fd.add_argument("--dir", type=int, default=2, help="which of its log dirs (2.., default 2)")
    return parser


def _incident(args, stack: LocalStack) -> None:
    """The demo's data and incidents (kafka_runbooks_dev.localstack.incidents)."""
    from kafka_runbooks_dev.localstack import incidents

    if args.command == "topics":
        for t in incidents.create_demo_topics(stack, args.records):
            print(f"{t.topic:<16} {t.partitions} partitions, {t.records} records")
    elif args.command == "log-recovery":
        _log_recovery(args, stack, incidents)
    else:
        lacking = jars.lacks(stack.lib_dir, jars.FILE_CONNECTORS)
        if lacking is not None:  # its connector is a file sink
            raise StackError(f"fail-connector needs the file connectors: {lacking.line()}")
        status = incidents.fail_connector(stack, args.name)
        failed = [t["id"] for t in status["tasks"] if t["state"] == "FAILED"]
        print(f"connector {args.name}: {status['connector']['state']}, task(s) {failed} FAILED")


def _log_recovery(args, stack: LocalStack, incidents) -> None:
    """Cause it, then (unless --no-wait) print what the broker's exporter says until RUNNING."""
    held = incidents.hold_in_log_recovery(stack, args.node, args.segments or incidents.RECOVERY_SEGMENTS)
    print(
        f"broker {held.broker} killed with {held.segments} segments of {held.topic} to recover "
        f"({held.records} records); started again, pid {held.pid}"
    )
    if args.no_wait:
        return
    started = time.monotonic()
    for reading in incidents.watch_recovery(stack, held.broker):
        counts = reading.recovery_text() if reading.counts_known else "no recovery gauges"
        print(f"{time.monotonic() - started:6.1f} s  {reading.state_name:<9} {counts}", flush=True)
    if not args.keep_topic:
        incidents.delete_recovery_topic(stack, held.broker)


def _status(stack: LocalStack, as_json: bool) -> None:
    """The nodes, after the stack's release and one line per part it lacks (on stderr with
    ``--json``, whose output stays the list of nodes)."""
    lacking = [m.line() for m in stack.lacking()]
    if as_json:
        print(json.dumps([s.as_dict() for s in stack.status()], indent=2))
        for line in lacking:
            print(line, file=sys.stderr)
        return
    print(f"Kafka {stack.kafka_version} (jars: {stack.lib_dir})")
    for line in lacking:
        print(line)
    for r in (s.as_dict() for s in stack.status()):
        state = f"running pid {r['pid']}" if r["running"] else "stopped"
        rack = f" rack={r['rack']}" if r["rack"] else ""
        print(f"{r['name']:<18} {r['address']:<17} {state:<20} metrics {r['metrics_url']}{rack}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)  # kafka-python's connection chatter
    args = build_parser().parse_args(argv)
    try:
        stack = LocalStack(home=args.home)  # refuses a KR_KAFKA_VERSION that is no supported release
        if args.command == "start":
            stack.start()
            print(f"Kafka {stack.kafka_version}")
            print(f"bootstrap servers: {stack.bootstrap_servers}")
            print(f"connect REST:      {stack.connect_url or 'none'}")
        elif args.command == "stop":
            stack.stop()
        elif args.command == "destroy":
            stack.destroy()
        elif args.command == "status":
            _status(stack, args.json)
        elif args.command == "kill":
            stack.kill(args.node)
        elif args.command == "stop-node":
            stack.stop_node(args.node)
        elif args.command == "start-node":
            stack.start_node(args.node, wait=args.wait)
        elif args.command == "running":
            return 0 if stack.is_running(args.node) else 1
        elif args.command == "fail-log-dir":
            aside = stack.fail_log_dir(args.node, args.dir)
            print(f"log dir {args.dir} of {args.node} failed; its data is in {aside}")
        elif args.command in ("topics", "fail-connector", "log-recovery"):
            _incident(args, stack)
    except (StackError, KeyError) as exc:
        print(f"kstack: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
