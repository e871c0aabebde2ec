"""Benchmark: a rolling restart of the whole local cluster with the roller.

    .venv/bin/python bench/rolling_restart.py [--port-base 47000] [--topics 20] [--home DIR]
        [--one-node-at-a-time]

Starts a fresh stack, creates ``--topics`` topics (6 partitions, RF 3) with some data,
then rolls every broker and controller exactly as ``kafka_broker_restart`` does
(availability checks, wait for ready, wait for ISR): a broker and a follower controller
side by side (``restart.lanes``), or one node at a time with ``--one-node-at-a-time``.
Prints the total roll time against the sum of the nodes' own restart times, each node's
SIGTERM to ready (the floor the target of 1.1 is compared with: what the roller's safety
checks, picks and ISR waits cost on top of the restarts), and against the sum of their
start-to-ready times alone (the new process launched to ready).

A broker's start-to-ready is not its own start: Kafka 4.3's controller refuses the new
process's registration (DUPLICATE_BROKER_REGISTRATION) until the old process's session times
out, broker.session.timeout.ms after its last heartbeat, which was its controlled shutdown,
before it exited. The benchmark reads each broker's own log for how long that took: most of
the start. So a broker's restart costs its controlled shutdown plus the session timeout
whenever its new process starts, and no clean roll of one broker at a time can come within
1.1 of the start-to-ready times alone (the stops are ~20 % of them and cannot overlap: a
second broker away would take partitions below min.insync.replicas).

Then, per node, where its share of the roll went: ``pick`` (the previous node of its lane
done, or the start, to this node's restart requested: its readiness and availability checks),
``stop`` (SIGTERM to exit: a broker's controlled shutdown), ``start`` (the new process
launched to ready by the roller's own test, polled every 100 ms from outside the roll:
the floor), ``notice`` (ready to the roller taking it for back) and ``isr`` (back to back
in every ISR it was in, a controller caught up with the quorum).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import threading
import time
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.probes import PrometheusProbe
from kafka_runbooks.restart.roller import Roller, RollOptions
from kafka_runbooks_dev.localstack import LocalStack, Topology
from kafka_runbooks_dev.restart_backend import LocalStackBackend

#: how often the benchmark steps the roller (the Airflow sensor steps it every step_interval_s)
STEP_INTERVAL_S = 0.2


class Timed:
    """Wraps an object: the seconds each of its calls took, added up per call name."""

    def __init__(self, inner, spent: dict[str, list[float]], prefix: str) -> None:
        self._inner, self._spent, self._prefix = inner, spent, prefix

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def timed(*args, **kwargs):
            started = time.monotonic()
            try:
                return attr(*args, **kwargs)
            finally:
                entry = self._spent.setdefault(f"{self._prefix}.{name}", [0.0, 0])
                entry[0] += time.monotonic() - started
                entry[1] += 1

        return timed


class TimedRoller(Roller):
    """The roller, noting when each node enters each phase (monotonic seconds) and how long
    its reads of Kafka, the probe and the back end took."""

    def __init__(self, admin, backend, probe) -> None:
        self.spent: dict[str, list[float]] = {}
        super().__init__(
            Timed(admin, self.spent, "admin"),
            Timed(backend, self.spent, "backend"),
            Timed(probe, self.spent, "probe"),
        )
        self.entered: dict[int, dict[str, float]] = {}
        # the roll's phases are entered by the roller and by its parts (availability, rejoin)
        for unit in (self, self.availability, self.rejoin):
            unit._enter = self._timed_enter(unit._enter)

    def _timed_enter(self, enter):
        def timed(node, phase: str) -> None:
            self.entered.setdefault(node.node_id, {})[phase] = time.monotonic()
            enter(node, phase)

        return timed


class TimedBackend(LocalStackBackend):
    """Times each node from process start to ready, by the roller's own readiness test."""

    def __init__(self, home: str) -> None:
        super().__init__(home)
        self.start_to_ready: dict[int, float] = {}
        # node id -> monotonic times of: stop sent, exited, started, ready (by the watcher)
        self.marks: dict[int, dict[str, float]] = {}
        self.ready_check = None  # (node id, offset the new process must pass or None) -> ready
        self.leader_offset = None  # () -> the quorum leader's log end offset
        self.controllers: set[int] = set()
        self.watchers: list[threading.Thread] = []
        self.last_error: dict[int, str] = {}  # node id -> the watcher's last failed read

    def _leader_offset(self) -> int:
        while True:  # the quorum may be electing a leader: read until it answers
            try:
                offset = self.leader_offset()
            except Exception:  # noqa: BLE001  (a read during an election: look again)
                offset = None
            if offset is not None and offset >= 0:
                return offset
            time.sleep(0.1)

    def _ready(self, node_id: int, offset: int | None) -> bool:
        try:
            return bool(self.ready_check(node_id, offset))
        except Exception as exc:  # noqa: BLE001  (a read while a node restarts: look again)
            self.last_error[node_id] = f"{type(exc).__name__}: {exc}"
            return False

    def restart(self, node_id: int) -> str:
        marks = self.marks.setdefault(node_id, {})
        marks["stop"] = time.monotonic()
        self.stack.stop_node(node_id)
        marks["exited"] = started = time.monotonic()
        self.stack.start_node(node_id)

        def watch() -> None:
            """Ready by the roller's own test: a controller once the quorum leader reports its
            new process fetching past the leader's log end offset read after the old one exited
            (a time or offset from before the restart would count the old process)."""
            offset = self._leader_offset() if node_id in self.controllers else None
            while not self._ready(node_id, offset):
                time.sleep(0.1)
            self.marks[node_id]["ready"] = time.monotonic()
            self.start_to_ready[node_id] = time.monotonic() - started

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        self.watchers.append(thread)
        return "timed restart"


def _fill(stack: LocalStack, topics: int) -> None:
    """``topics`` topics of 6 partitions, RF 3, with 20000 records of 512 bytes among them."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    names = [f"bench-{i}" for i in range(topics)]
    for f in client.create_topics([NewTopic(n, 6, 3) for n in names]).values():
        f.result(60)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all"})
    for i in range(20000):
        producer.produce(names[i % len(names)], b"x" * 512)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)


def _roll(stack: LocalStack, backend: TimedBackend, overlap: bool) -> tuple[TimedRoller, object, float]:
    """Plan and roll every node as the sensor does, watched by a second roller's readiness test."""
    probe = PrometheusProbe(endpoints={n.node_id: n.metrics_url for n in stack.topology.broker_nodes})
    with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}) as admin:
        roller = TimedRoller(admin, backend, probe)
        state = roller.plan(None, "benchmark", RollOptions(operation_timeout_s=300, overlap=overlap))
        print(state.stages_text)
        with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}) as watcher:
            observer = Roller(watcher, LocalStackBackend(str(stack.home)), probe)
            backend.ready_check = lambda n, offset: observer.observer.observe(n, state.nodes[n].role, offset)[
                0
            ]
            backend.leader_offset = lambda: (
                (q := watcher.describe_quorum()).leader and q.leader.log_end_offset
            )
            backend.controllers = {n for n, p in state.nodes.items() if p.role == "controller"}
            started = time.monotonic()
            while not roller.step(state):
                time.sleep(STEP_INTERVAL_S)
            total = time.monotonic() - started
            roller.entered.setdefault(-1, {})["roll_started"] = started
            for thread in backend.watchers:
                thread.join(120)
    return roller, state, total


def _breakdown(roller: TimedRoller, backend: TimedBackend, state) -> list[float]:
    """Per node: pick, stop, start (the floor), notice, isr; returns the sum of each column
    (with two lanes the sums overlap in time: they add up to more than the roll)."""
    print("node   pick   stop  start notice    isr  lane (seconds)")
    started = roller.entered[-1]["roll_started"]
    done_in = {"broker": started, "controller": started}  # each lane's previous node done
    columns = [0.0] * 5
    for node_id in state.order:
        lane = state.nodes[node_id].lane
        previous = done_in[lane] if lane in done_in else max(done_in.values())
        marks, phases = backend.marks.get(node_id, {}), roller.entered.get(node_id, {})
        points = [
            previous,
            marks.get("stop"),
            marks.get("exited"),
            marks.get("ready"),
            phases.get("wait_isr"),
            phases.get("done"),
        ]
        if None in points:
            print(f"{node_id:>4}  incomplete: {marks} {phases}")
            continue
        spans = [b - a for a, b in zip(points, points[1:], strict=False)]
        columns = [c + x for c, x in zip(columns, spans, strict=True)]
        print(f"{node_id:>4} " + " ".join(f"{x:6.1f}" for x in spans) + f"  {lane}")
        done_in = {k: points[-1] for k in done_in} if lane not in done_in else {**done_in, lane: points[-1]}
    print(" sum " + " ".join(f"{x:6.1f}" for x in columns))
    print("the roller's reads (seconds, calls; the roller's own calls only):")
    for name, (seconds, calls) in sorted(roller.spent.items(), key=lambda kv: -kv[1][0]):
        print(f"  {name}: {seconds:.1f} s in {calls} calls")
    return columns


_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def registration_waits(stack: LocalStack, brokers: list[int]) -> dict[int, tuple[float, int]]:
    """Per broker, from its own log (one clock): how long its last new process was refused
    registration before it was registered (its first refusal to "Successfully registered"), and
    how many refusals. Kafka's controller refuses a new incarnation (DUPLICATE_BROKER_REGISTRATION)
    while the old one's session lives; a clean controlled shutdown leaves it fenced with its session
    alive until broker.session.timeout.ms after its last heartbeat (KAFKA-19047 lets a broker
    re-register at once only while its controlled shutdown is still in progress)."""
    from datetime import datetime

    out = {}
    for broker in brokers:
        lines = stack.log_file(broker).read_text(errors="replace").splitlines()
        starts = [i for i, line in enumerate(lines) if "is now STARTING" in line]
        if not starts:
            continue
        refused, first, registered = 0, None, None
        for line in lines[starts[-1] :]:
            stamp = _LOG_TIME.match(line)
            when = stamp and datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if "DUPLICATE_BROKER_REGISTRATION" in line:
                refused += 1
                first = first if first is not None else when
            elif "Successfully registered broker" in line:
                registered = when
                break
        if registered is not None:
            out[broker] = ((registered - first) if first is not None else 0.0, refused)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=47000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--home", help="the stack's home (default: a temporary directory)")
    parser.add_argument("--one-node-at-a-time", action="store_true", help="no lanes: one node at a time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kr-bench-roll-", dir=args.home) as tmp:
        stack = LocalStack(home=Path(tmp), topology=Topology(port_base=args.port_base, connect=False))
        stack.start()
        try:
            _fill(stack, args.topics)
            backend = TimedBackend(str(stack.home))
            roller, state, total = _roll(stack, backend, overlap=not args.one_node_at_a_time)
            time.sleep(1)
            waits = registration_waits(stack, [n.node_id for n in stack.topology.broker_nodes])
        finally:
            stack.stop()
    floor = sum(backend.start_to_ready.values())
    print(f"nodes rolled: {len(state.order)} ({state.order})")
    print(f"total roll time: {total:.1f} s")
    print(f"sum of start-to-ready times (each new process launched to ready): {floor:.1f} s")
    for node_id, seconds in sorted(backend.start_to_ready.items()):
        print(f"  node {node_id}: {seconds:.1f} s")
    missing = sorted(set(state.order) - set(backend.start_to_ready))
    if missing:  # the floor would be too low: say so rather than print a flattering ratio
        print(f"NO start-to-ready time for node(s) {missing}: the floor lacks them")
        for node_id in missing:
            print(f"  node {node_id}: the watcher's last failed read: {backend.last_error.get(node_id)}")
    pick, stop, _, notice, isr = _breakdown(roller, backend, state)
    print(
        f"ratio total/(start to ready only): {total / floor:.2f} (the stops and the session waits below left out)"
    )
    # A clean restart's stop (SIGTERM to exit: a broker's controlled shutdown) is Kafka's own
    # work too, and outside the floor above: the roller cannot shorten it without a kill -9.
    print(
        f"the nodes' own stop-to-exit times: {stop:.1f} s; the roller's own share (pick, notice, isr): "
        f"{pick + notice + isr:.1f} s"
    )
    print(
        f"sum of the nodes' own restart times (stop + start, SIGTERM to ready: the floor): {floor + stop:.1f} s"
    )
    print(f"ratio total/(stop + start): {total / (floor + stop):.2f} (target <= 1.1)")
    refused = sum(w for w, _ in waits.values())
    print(
        f"of the brokers' start-to-ready, {refused:.1f} s was Kafka's controller refusing the new process's "
        f"registration (DUPLICATE_BROKER_REGISTRATION, {sum(n for _, n in waits.values())} refusals) until the "
        "old process's session timed out, a wait that began at its controlled shutdown, before it exited:"
    )
    for broker, (seconds, count) in sorted(waits.items()):
        print(f"  broker {broker}: refused {count} times over {seconds:.1f} s")


if __name__ == "__main__":
    main()
