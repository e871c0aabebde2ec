"""Per runbook: the incident it exists for, how it is triggered, and the end state "success" claims.

Every schedule gets a topic of its own (``chaos-<runbook>-<seed>``) with an explicit assignment
that puts replicas where the runbook acts, the producer writes to it throughout, and the watcher
watches it. :meth:`Scenario.final_check` reads the cluster after the session timeout and says
what disagrees with a success (empty: it agrees); :meth:`Scenario.restore` puts the stack back
(every node started, the topic deleted, a fully replicated cluster) for the next schedule.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from dataclasses import dataclass, field

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks.evidence import QuorumView, silent_brokers
from kafka_runbooks.failed_broker.chunk_silence import SILENT_BOUND_S
from kafka_runbooks_dev.chaos.traffic import produce_recorded
from kafka_runbooks_dev.helpers import cluster_healthy, create_topic, produce, wait_until

SHARED_DISK_CEILING = 99  # the stack's dirs share the host's disk: the ceiling is not the subject here


@dataclass
class Context:
    """What a scenario works with: the stack, an admin client on it, Airflow, the schedule's rng."""

    stack: object
    admin: ClusterAdmin
    airflow: object
    rng: random.Random


@dataclass
class Setup:
    """The incident built for one schedule."""

    topic: str
    conf: dict
    acted_on: list[int]
    incident: list[int] = field(default_factory=list)  # nodes the incident itself keeps away
    loss_allowed: bool = False
    expect: dict = field(default_factory=dict)
    min_isr: int = 2
    acked_before: dict[str, tuple[int, int]] = field(default_factory=dict)  # records the incident wrote


class Scenario:
    """One runbook's incident; subclasses fill in the DAG, its fault points and the setups."""

    runbook = ""
    dag_id = ""
    gate: str | None = "approval_gate"
    tasks: tuple[str, ...] = ()
    variants: tuple[str, ...] = ("default",)
    topology = "default"  # which stack it runs on (environment.TOPOLOGIES)
    fresh_stack = False  # a fresh stack before each schedule (its end state is not a start state)

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        """Build the incident; return the run's conf and what the checks need."""
        raise NotImplementedError

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        """What the cluster, read now, says against a success (empty: it agrees)."""
        return healthy_now(ctx.admin, [setup.topic])

    def restore(self, ctx: Context, setup: Setup) -> None:
        """Every node back, the topic gone, a fully replicated cluster."""
        restore_stack(ctx, [setup.topic])


# ---------------------------------------------------------------------------------- shared
def make_topic(ctx: Context, topic: str, assignment: dict[int, list[int]], min_isr: int = 2) -> None:
    """The schedule's topic, its replicas where given, filled with a little data, fully in sync."""
    bs = ctx.stack.bootstrap_servers
    create_topic(bs, topic, assignment=assignment, config={"min.insync.replicas": str(min_isr)})

    def in_sync() -> bool:
        try:  # a stack just started: its brokers may not all know the topic (or each other) yet
            return all(len(p.isr) == len(p.replicas) for p in ctx.admin.describe_partitions([topic]))
        except Exception:
            return False

    wait_until(in_sync, 90, 0.5, f"{topic} fully in sync")
    for p in assignment:
        produce(bs, topic, 200, partition=p, size=1000)


def healthy_now(admin: ClusterAdmin, topics: list[str]) -> list[str]:
    """Offline or under-replicated partitions of ``topics`` and leaders that do not answer themselves."""
    parts = admin.describe_partitions(topics)
    out = [f"{p.name} offline" for p in parts if p.leader < 0]
    out += [
        f"{p.name} ISR {list(p.isr)} of {list(p.replicas)}"
        for p in parts
        if p.leader >= 0 and len(p.isr) < len(p.replicas)
    ]
    silent = silent_brokers(admin, {p.leader for p in parts if p.leader >= 0})
    out += [f"leader {b} does not answer itself ({why})" for b, why in silent.items()]
    return out


def every_node_back(ctx: Context, timeout: float = 300) -> None:
    """Thaw whatever is frozen, start whatever is down, wait until every node is ready."""
    for node in ctx.stack.topology.nodes:
        with contextlib.suppress(Exception):
            ctx.stack.thaw(node.name)
    for status in ctx.stack.status():
        if not status.running:
            ctx.stack.start_node(status.name)
    ctx.stack.wait_ready([s.name for s in ctx.stack.status()], timeout)


def restore_stack(ctx: Context, topics: list[str], timeout: float = 300) -> None:
    """Every node back, ``topics`` deleted, a healthy cluster with nothing in flight."""
    from confluent_kafka.admin import AdminClient

    every_node_back(ctx, timeout)
    clear_throttles(ctx)
    client = AdminClient({"bootstrap.servers": ctx.stack.bootstrap_servers})
    for future in client.delete_topics(topics, operation_timeout=60).values():
        with contextlib.suppress(Exception):
            future.result(90)
    wait_until(
        lambda: cluster_healthy(ctx.admin), timeout, 1, "a fully replicated cluster after the schedule"
    )
    wait_until(lambda: not ctx.admin.list_reassignments(), 120, 1, "no reassignment in flight")


def clear_throttles(ctx: Context) -> None:
    """Delete every replication throttle left anywhere (recorded as a violation before this), so the
    next schedule starts from a clean cluster."""
    from kafka_runbooks.failed_broker.throttle import BROKER_KEYS, TOPIC_KEYS, leftover_throttles

    for where, keys in leftover_throttles(ctx.admin, brokers_of(ctx), ctx.admin.list_topics()).items():
        kind, _, name = where.partition(" ")
        known = BROKER_KEYS if kind == "broker" else TOPIC_KEYS
        ctx.admin.incremental_alter_configs(kind, {name: {k: ("DELETE", None) for k in keys if k in known}})


def brokers_of(ctx: Context) -> list[int]:
    """The stack's broker ids."""
    return [n.node_id for n in ctx.stack.topology.broker_nodes]


# ---------------------------------------------------------------------------------- runbooks
class Restart(Scenario):
    """kafka_broker_restart: a rolling restart of brokers, a controller, or both."""

    runbook, dag_id = "restart", "kafka_broker_restart"
    tasks = (
        "check_input",
        "acquire_lease",
        "plan_restart",
        "approval_gate",
        "rolling_restart",
        "release_lease",
    )
    variants = ("brokers", "controller", "mixed")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        controllers = [n.node_id for n in ctx.stack.topology.controller_nodes]
        make_topic(ctx, topic, {p: ctx.rng.sample(brokers, 3) for p in range(3)})
        nodes = {
            "brokers": sorted(ctx.rng.sample(brokers, 2)),
            "controller": [ctx.rng.choice(controllers)],
            "mixed": [ctx.rng.choice(brokers), ctx.rng.choice(controllers)],
        }[variant]
        conf = {"node_ids": ",".join(map(str, nodes)), "reason": "chaos campaign", "operation_timeout_s": 120}
        return Setup(topic, conf, nodes)

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        out = healthy_now(ctx.admin, [setup.topic])
        silent = silent_brokers(ctx.admin, brokers_of(ctx))
        out += [f"broker {b} does not answer itself ({why})" for b, why in silent.items()]
        view = QuorumView(ctx.admin.describe_quorum())
        out += [f"voter {n} {c.state}: {c.why}" for n, c in view.voters().items() if not c.caught_up]
        return out


class Heal(Scenario):
    """kafka_failed_broker_reassignment: a broker dead for good; its replicas move to the others."""

    runbook, dag_id = "heal", "kafka_failed_broker_reassignment"
    tasks = (
        "validate",
        "snapshot_cluster",
        "plan_reassignment",
        "approval_gate",
        "execute_chunks",
        "verify_result",
    )
    variants = ("one-chunk", "chunks")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        dead = ctx.rng.choice(brokers)
        others = [b for b in brokers if b != dead]
        make_topic(ctx, topic, {p: [dead, *ctx.rng.sample(others, 2)] for p in range(4)})
        ctx.stack.kill(dead)
        wait_until(
            lambda: (
                not ctx.admin.describe_brokers().get(dead, None)
                or not ctx.admin.describe_brokers()[dead].available
            ),
            60,
            0.5,
        )
        conf = {
            "failed_brokers": str(dead),
            "throttle_bytes_per_sec": "20 MiB",
            "max_disk_usage_percent": SHARED_DISK_CEILING,
            # the dead broker also hosts internal topics (consumer offsets, Connect's): ~60 partitions
            "max_partitions_per_chunk": 20 if variant == "chunks" else 1000,
        }
        return Setup(topic, conf, others, incident=[dead], expect={"dead": dead})

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        dead = setup.expect["dead"]
        out = healthy_now(ctx.admin, [setup.topic])
        parts = ctx.admin.describe_partitions([setup.topic])
        return out + [
            f"{p.name} still has a replica on dead broker {dead}" for p in parts if dead in p.replicas
        ]


class Decommission(Scenario):
    """kafka_broker_decommission: a live broker drained of every replica."""

    runbook, dag_id = "decommission", "kafka_broker_decommission"
    tasks = Heal.tasks
    variants = ("one-chunk", "chunks")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        drained = ctx.rng.choice(brokers)
        others = [b for b in brokers if b != drained]
        make_topic(ctx, topic, {p: [drained, *ctx.rng.sample(others, 2)] for p in range(4)})
        conf = {
            "broker_ids": str(drained),
            "throttle_bytes_per_sec": "20 MiB",
            "max_disk_usage_percent": SHARED_DISK_CEILING,
            "max_partitions_per_chunk": 20 if variant == "chunks" else 1000,
        }
        return Setup(topic, conf, [drained, *others], expect={"drained": drained})

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        drained = setup.expect["drained"]
        out = healthy_now(ctx.admin, [setup.topic])
        parts = ctx.admin.describe_partitions([setup.topic])
        return out + [
            f"{p.name} still has a replica on drained broker {drained}"
            for p in parts
            if drained in p.replicas
        ]


class Rebalance(Scenario):
    """kafka_rebalance: a skewed topic spread over the cluster (full), or its RF raised."""

    runbook, dag_id = "rebalance", "kafka_rebalance"
    tasks = Heal.tasks
    variants = ("full", "replication-factor")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        crowded = sorted(ctx.rng.sample(brokers, 3 if variant == "full" else 2))
        make_topic(ctx, topic, {p: list(crowded) for p in range(6)}, min_isr=1 if variant != "full" else 2)
        conf = {
            "mode": variant,
            "throttle_bytes_per_sec": "20 MiB",
            "max_disk_usage_percent": SHARED_DISK_CEILING,
        }
        if variant == "replication-factor":
            conf.update({"topics": topic, "replication_factor": 3})
        return Setup(topic, conf, brokers, expect={"variant": variant}, min_isr=1 if variant != "full" else 2)

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        out = healthy_now(ctx.admin, [setup.topic])
        if setup.expect["variant"] == "replication-factor":
            parts = ctx.admin.describe_partitions([setup.topic])
            out += [f"{p.name} has RF {len(p.replicas)}, not 3" for p in parts if len(p.replicas) != 3]
        return out


class Unclean(Scenario):
    """kafka_unclean_recovery: a partition offline, its last in-sync replica dead, a stale one back."""

    runbook, dag_id = "unclean", "kafka_unclean_recovery"
    gate = "approve_elections"
    tasks = (
        "check_input",
        "acquire_lease",
        "plan_recovery",
        "approve_elections",
        "run_elections",
        "release_lease",
    )
    variants = ("clean-path", "allow-loss")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        last, stale = ctx.rng.sample(brokers, 2)
        make_topic(ctx, topic, {0: [last, stale]}, min_isr=1)
        ctx.stack.stop_node(stale)
        wait_until(lambda: stale not in ctx.admin.describe_partitions([topic])[0].isr, 60, 0.5)
        acked = produce_recorded(ctx.stack.bootstrap_servers, topic, 100, 0, "only-on-the-last-isr-member")
        ctx.stack.kill(last)
        ctx.stack.start_node(stale, wait=True)
        wait_until(lambda: ctx.admin.describe_partitions([topic])[0].leader == -1, 60, 0.5)
        allow = variant == "allow-loss"
        conf = {
            "partitions_json": json.dumps({"partitions": [{"topic": topic, "partitions": [0]}]}),
            "mode": "automated_recovery",
            "recovery_duration_ms": 10000,
            "allow_committed_loss": allow,
            "settle_period_s": 5,
        }
        return Setup(
            topic,
            conf,
            [stale],
            incident=[last, stale],
            loss_allowed=allow,
            expect={"stale": stale, "last": last},
            min_isr=1,
            acked_before=acked,
        )

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        part = ctx.admin.describe_partitions([setup.topic])[0]
        if part.leader < 0:
            return [f"{part.name} still offline"]
        out = []
        if part.leader == setup.expect["stale"] and not setup.loss_allowed:
            out.append(f"{part.name} led by the stale replica {part.leader} without allow_committed_loss")
        silent = silent_brokers(ctx.admin, [part.leader])
        return out + [f"leader {b} does not answer itself ({why})" for b, why in silent.items()]


class LogDir(Scenario):
    """kafka_log_dir_failure: a live broker's log dir fails; exactly its replicas move elsewhere."""

    runbook, dag_id = "log-dir", "kafka_log_dir_failure"
    tasks = Heal.tasks
    topology = "jbod"

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        brokers = brokers_of(ctx)
        broken = ctx.rng.choice(brokers)
        others = [b for b in brokers if b != broken]
        make_topic(ctx, topic, {p: [broken, ctx.rng.choice(others)] for p in range(8)}, min_isr=1)
        ctx.stack.fail_log_dir(broken, 2)
        wait_until(lambda: _dir_offline(ctx.admin, broken), 60, 1, f"broker {broken}'s data-2 offline")
        conf = {
            "broker_id": broken,
            "mode": "move",
            "throttle_bytes_per_sec": "20 MiB",
            "max_disk_usage_percent": SHARED_DISK_CEILING,
        }
        return Setup(topic, conf, [broken, *others], expect={"broken": broken}, min_isr=1)

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        broken = setup.expect["broken"]
        out = healthy_now(ctx.admin, [setup.topic])
        states, errors = ctx.admin.describe_log_dir_states([broken])
        on_broken = {(r.topic, r.partition) for d in states.get(broken, ()) if d.online for r in d.replicas}
        parts = ctx.admin.describe_partitions([setup.topic])
        out += [
            f"{p.name} still assigned to broker {broken} but not in its healthy dirs"
            for p in parts
            if broken in p.replicas and (p.topic, p.partition) not in on_broken
        ]
        return out + [f"broker {b}: {e}" for b, e in errors.items()]

    def restore(self, ctx: Context, setup: Setup) -> None:
        restore_log_dirs(ctx)
        restore_stack(ctx, [setup.topic])


class ControllerReplace(Scenario):
    """kafka_controller_replace: a dead voter of a dynamic quorum replaced with the spare observer."""

    runbook, dag_id = "controller-replace", "kafka_controller_replace"
    gate = "approve_replacement"
    tasks = (
        "check_input",
        "acquire_lease",
        "plan_replacement",
        "approve_replacement",
        "replace",
        "release_lease",
    )
    topology = "jbod"
    fresh_stack = True  # the voter set it leaves is not the one the next schedule starts from

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        spare = ctx.stack.topology.spare_controller_nodes[0]
        ctx.stack.start_node(spare.name, wait=True)
        make_topic(ctx, topic, {0: [brokers_of(ctx)[0]]}, min_isr=1)
        leader = ctx.admin.describe_quorum().leader_id
        dead = ctx.rng.choice([n.node_id for n in ctx.stack.topology.controller_nodes if n.node_id != leader])
        ctx.stack.kill(dead)
        wait_until(
            lambda: spare.node_id in {o.node_id for o in ctx.admin.describe_quorum().observers}, 120, 1
        )
        conf = {
            "remove_voters": [dead],
            "new_controller_id": spare.node_id,
            "new_controller_endpoint": f"CONTROLLER://{spare.address}",
            "catch_up_timeout_s": "90s",
            "settle_period_s": "3s",
        }
        voters = sorted({n.node_id for n in ctx.stack.topology.controller_nodes} - {dead} | {spare.node_id})
        acted = [n.node_id for n in ctx.stack.topology.controller_nodes if n.node_id != dead] + [
            spare.node_id
        ]
        return Setup(topic, conf, acted, incident=[dead], expect={"voters": voters}, min_isr=1)

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        view = QuorumView(ctx.admin.describe_quorum())
        voters = sorted(view.voters())
        out = [] if voters == setup.expect["voters"] else [f"voters {voters}, not {setup.expect['voters']}"]
        return out + [f"voter {n} {c.state}: {c.why}" for n, c in view.voters().items() if not c.caught_up]

    def restore(self, ctx: Context, setup: Setup) -> None:
        """Nothing: the next schedule gets a fresh stack (``fresh_stack``)."""


class Stop(Scenario):
    """kafka_reassignment_stop: a slow heal moving replicas is stopped while its chunks run."""

    runbook, dag_id = "stop", "kafka_reassignment_stop"
    gate = None
    tasks = ("request_stop", "wait_for_executing_task", "stop_and_verify")

    def prepare(self, ctx: Context, topic: str, variant: str) -> Setup:
        heal = Heal()
        setup = heal.prepare(ctx, topic, "one-chunk")
        for p in range(4):  # enough bytes that the chunk is still copying when the stop comes
            produce(ctx.stack.bootstrap_servers, topic, 3000, partition=p, size=2000)
        run_id = ctx.airflow.trigger(heal.dag_id, {**setup.conf, "throttle_bytes_per_sec": "512 KiB"})
        ctx.airflow.wait_for_approval(heal.dag_id, run_id, "approval_gate", timeout=300)
        ctx.airflow.answer(heal.dag_id, run_id, "approval_gate", [APPROVE_OPTION])
        wait_until(lambda: bool(ctx.admin.list_reassignments()), 180, 1, "the heal's chunk in flight")
        before = {p.name: p.replicas for p in ctx.admin.describe_partitions([topic])}
        return Setup(
            topic,
            {"reason": "chaos campaign: stop the heal", "wait_for_task_s": "60s"},
            setup.acted_on,
            incident=setup.incident,
            expect={
                "heal_run": run_id,
                "heal_dag": heal.dag_id,
                "dead": setup.expect["dead"],
                "before": before,
            },
        )

    def final_check(self, ctx: Context, setup: Setup) -> list[str]:
        out = (
            [f"reassignment still in flight: {sorted(ctx.admin.list_reassignments())[:5]}"]
            if ctx.admin.list_reassignments()
            else []
        )
        # the stopped heal ends once its cleanup is done: that may wait for a broker a fault stopped
        # (the throttle cleanup retries over SILENT_BOUND_S), so it gets that long and a margin
        with contextlib.suppress(Exception):
            wait_until(lambda: self._heal_state(ctx, setup) in ("failed", "success"), SILENT_BOUND_S + 60, 2)
        state = self._heal_state(ctx, setup)
        if state not in ("failed", "success"):
            out.append(f"the stopped heal is still {state} {SILENT_BOUND_S + 60:.0f} s after the stop")
        return out

    @staticmethod
    def _heal_state(ctx: Context, setup: Setup) -> str:
        return ctx.airflow.dag_run(setup.expect["heal_dag"], setup.expect["heal_run"])["state"]

    def restore(self, ctx: Context, setup: Setup) -> None:
        with contextlib.suppress(Exception):
            wait_until(
                lambda: (
                    ctx.airflow.dag_run(setup.expect["heal_dag"], setup.expect["heal_run"])["state"]
                    in ("failed", "success")
                ),
                300,
                2,
            )
        restore_stack(ctx, [setup.topic])


def _dir_offline(admin: ClusterAdmin, broker: int) -> bool:
    states, _ = admin.describe_log_dir_states([broker])
    return any(not d.online for d in states.get(broker, ()))


def restore_log_dirs(ctx: Context, timeout: float = 180) -> None:
    """Put back every log dir a schedule failed, as a disk that came back (the broker killed, its dir
    returned with its data, started again), then wait for every dir online."""
    for node in ctx.stack.topology.broker_nodes:
        failed = [d for d in ctx.stack.log_dirs(node) if d.is_file()]
        if not failed:
            continue
        ctx.stack.kill(node.name)
        for path in failed:
            path.unlink()
            path.with_name(path.name + ".failed").rename(path)
        ctx.stack.start_node(node.name, wait=True, timeout=timeout)
    wait_until(
        lambda: not any(_dir_offline(ctx.admin, b) for b in brokers_of(ctx)), timeout, 1, "every dir online"
    )


SCENARIOS: dict[str, Scenario] = {
    s.runbook: s
    for s in (
        Restart(),
        Heal(),
        Decommission(),
        Rebalance(),
        Unclean(),
        LogDir(),
        ControllerReplace(),
        Stop(),
    )
}


def wait_s(seconds: float) -> None:
    """A plain wait, named for what it waits (the session timeout before a final read)."""
    time.sleep(seconds)
