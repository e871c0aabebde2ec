"""The failed-broker sweep and reassignment through a real Airflow and the real stack.

1. A broker stopped and started within the failure threshold starts nothing.
2. A broker killed for good: the sweep starts the countdown, then (short threshold)
   starts the reassignment; the approval is answered through the API; the execution
   task is killed mid-chunk (marked failed through the API) and its throttle removed by
   the cleanup task (the killed try submits no chunk after Airflow says it failed, before its
   SIGTERM); a new run adopts what was in flight, plans the rest with the Spark
   job, and finishes: nothing names the dead broker, full RF and ISR, no throttle config
   left, the new replicas spread within 1 among the receivers, nothing moved twice.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks.failed_broker.failures import FailureStore
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks.paths import safe_name
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests.e2e.conftest import AIRFLOW_TEST_HOME
from tests.helpers import create_topic, produce, unique_topic, wait_until

SWEEP = "kafka_failed_broker_sweep"
REASSIGN = "kafka_failed_broker_reassignment"
DEAD = 4
RACK = {1: "rack-a", 2: "rack-b", 3: "rack-a", 4: "rack-b"}
pytestmark = pytest.mark.timeout(1200)
FAILURES = AIRFLOW_TEST_HOME / "kafka_runbooks" / "state" / "failed_brokers"  # the sweeps' memory


def state_file(run_id: str, name: str = "exec-state.json") -> Path:
    return AIRFLOW_TEST_HOME / "kafka_runbooks" / "reassign" / REASSIGN / safe_name(run_id) / name


def reassign_runs(airflow: AirflowLocal) -> list[dict]:
    return airflow.api("GET", f"/dags/{REASSIGN}/dagRuns", params={"limit": 100})["dag_runs"]


def sweep(airflow: AirflowLocal, conf: dict) -> tuple[str, str]:
    run_id = airflow.trigger(SWEEP, conf)
    state = airflow.wait_for_run(SWEEP, run_id, timeout=300)
    # one mapped 'cluster' group per cluster of the fleet; the default fleet is kafka_default alone
    log = airflow.task_log_text(SWEEP, run_id, "cluster.sweep", map_index=0)
    assert state == "success", f"{airflow.task_instances(SWEEP, run_id)}\n{log[-4000:]}"
    return run_id, log


def sweep_logs(airflow: AirflowLocal) -> str:
    """Every sweep run's log: scheduled sweeps (the DAG is unpaused) may see a change first."""
    runs = airflow.api("GET", f"/dags/{SWEEP}/dagRuns", params={"limit": 100})["dag_runs"]
    return "\n".join(
        airflow.task_log_text(SWEEP, r["dag_run_id"], "cluster.sweep", map_index=0)
        for r in runs
        if r["state"] == "success"
    )


def candidates(replicas: list[int], live: list[int]) -> list[int]:
    """Receivers that keep the partition's distinct racks (what any correct plan may choose)."""
    others = [b for b in replicas if b != DEAD]
    racks = len({RACK[b] for b in replicas})
    return [b for b in live if b not in others and len({RACK[x] for x in others} | {RACK[b]}) >= racks]


def add_balanceable_topics(admin, bs: str) -> list[str]:
    """Topics that let a plan spread the dead broker's replicas evenly, whatever the stack
    already holds: each receiver first gets the same number of forced moves, then pairs
    of partitions [2, 4] that may go to 1 or 3 (the plan's balancing decides)."""
    live = [1, 2, 3]
    forced = Counter()
    for p in admin.describe_partitions():
        if DEAD in p.replicas:
            c = candidates(list(p.replicas), live)
            if len(c) == 1:
                forced[c[0]] += 1
    top = max(forced.values(), default=0) + 1
    only_to = {1: [2, 3, DEAD], 2: [1, DEAD], 3: [1, 2, DEAD]}  # forced to 1, 2, 3 respectively
    rf3: list[list[int]] = []
    rf2: list[list[int]] = [[1, DEAD]]  # the bulky topic below moves one to 1 and one to 3
    for broker in live:
        (rf2 if broker == 2 else rf3).extend([list(only_to[broker])] * (top - forced[broker]))
    for _ in range(2):  # two free (1 or 3) for one more forced to 2
        rf2 += [[2, DEAD], [DEAD, 2], [1, DEAD]]
    even2, even3 = unique_topic("heal-even2"), unique_topic("heal-even3")
    create_topic(bs, even2, assignment=dict(enumerate(rf2)))
    if rf3:
        create_topic(bs, even3, assignment=dict(enumerate(rf3)))
    # ~2.5 MB per partition, one forced move to 1 and one to 3: past the first fetch (1 MB per
    # partition, 10 MB per response, unthrottled) the copy takes ~30 s at 50 kB/s: time enough to
    # see it moving for 5 s and kill the task mid-chunk (the kill lands within ~1 s), while 5 MB
    # a partition kept the resumed run copying for 80 s (and 20 MB for 6 minutes)
    bulky = unique_topic("heal-bulky")
    create_topic(bs, bulky, assignment={0: only_to[1], 1: only_to[3]})
    assert produce(bs, even2, 20000, size=200) == 20000
    assert produce(bs, bulky, 12500, size=400) == 12500
    even = even2
    return [even, bulky, even3] if rf3 else [even, bulky]


@pytest.fixture
def clean_throttles(admin):
    yield
    live = [b.broker_id for b in admin.describe_brokers().values() if b.available]
    for name, keys in leftover_throttles(admin, live, admin.list_topics()).items():
        kind, resource = name.split(" ", 1)
        admin.incremental_alter_configs(kind, {resource: {k: ("DELETE", None) for k in keys}})


def test_bad_input_ends_in_a_refuse_record_and_the_review_fails_naming_it(airflow_local: AirflowLocal):
    """A controller id named as the failed broker: validate refuses with a DECISION record naming
    it a controller; review_plan (which runs whatever happened upstream) fails, naming validate,
    instead of failing with a TypeError that would hide the real error (a skip would carry through
    to a green run: the fault campaign's heal seed 4)."""
    airflow_local.wait_for_dag(REASSIGN, timeout=120)
    airflow_local.unpause(REASSIGN)
    run = airflow_local.trigger(REASSIGN, {"failed_brokers": [9001]})
    assert airflow_local.wait_for_run(REASSIGN, run, timeout=300) == "failed"
    assert airflow_local.task_instance(REASSIGN, run, "validate")["state"] == "failed"
    validate_log = airflow_local.task_log_text(REASSIGN, run, "validate")
    assert "broker(s) named as failed [9001]: node(s) [9001] are KRaft controllers" in validate_log, (
        validate_log[-3000:]
    )
    assert "DECISION validate: refuse the run: nothing was done because" in validate_log
    review = airflow_local.task_instance(REASSIGN, run, "review_plan")
    review_log = airflow_local.task_log_text(REASSIGN, run, "review_plan")
    assert review["state"] == "failed", review_log[-3000:]
    assert "DECISION plan: the run failed earlier because validate did not finish" in review_log
    assert "TypeError" not in review_log
    for task in ("approval_gate", "execute_chunks"):
        assert airflow_local.task_instance(REASSIGN, run, task)["state"] in ("skipped", "upstream_failed")


def test_triggered_from_its_defaults_on_a_healthy_cluster_it_moves_nothing(
    airflow_local: AirflowLocal, restore_stack
):
    """The form's defaults ('detect') are safe: on a cluster with no failed broker the run ends
    at validate with a DECISION "nothing to do", and no gate, chunk or throttle follows."""
    airflow_local.wait_for_dag(REASSIGN, timeout=120)
    airflow_local.unpause(REASSIGN)
    run = airflow_local.trigger(REASSIGN, {})
    assert airflow_local.wait_for_run(REASSIGN, run, timeout=300) == "success"
    log = airflow_local.task_log_text(REASSIGN, run, "validate")
    assert "DECISION validate: nothing to do because no broker hosting replicas is failed" in log, log[-3000:]
    for task in ("approval_gate", "execute_chunks"):
        assert airflow_local.task_instance(REASSIGN, run, task)["state"] == "skipped", task


def test_a_bounce_within_the_threshold_starts_nothing(airflow_local: AirflowLocal, restore_stack, admin):
    stack = restore_stack
    airflow_local.wait_for_dag(SWEEP, timeout=120)
    airflow_local.wait_for_dag(REASSIGN, timeout=120)
    before = len(reassign_runs(airflow_local))
    conf = {"failure_threshold_minutes": 10, "alert_after_minutes": 5}
    stack.stop_node("broker-3")
    wait_until(lambda: not (b := admin.describe_brokers().get(3)) or b.fenced, 60, 1, "broker 3 down")
    wait_run, log = sweep(airflow_local, conf)
    assert "DECISION failure tracking [broker 3]: wait because broker 3 failed" in log
    assert (
        airflow_local.task_instance(SWEEP, wait_run, "cluster.start_reassignment", map_index=0)["state"]
        == "skipped"
    )
    assert len(reassign_runs(airflow_local)) == before
    assert "DECISION failure tracking [broker 3]: start the countdown" in sweep_logs(airflow_local)
    stack.start_node("broker-3")
    stack.wait_ready(["broker-3"], 180)
    wait_until(lambda: (b := admin.describe_brokers().get(3)) and b.available, 60, 1, "broker 3 back")
    sweep(airflow_local, conf)
    assert "DECISION failure tracking [broker 3]: forget the failure because broker 3 is available again" in (
        sweep_logs(airflow_local)
    )
    assert len(reassign_runs(airflow_local)) == before


def test_dead_broker_healed_through_sweep_approval_kill_and_rerun(
    airflow_local: AirflowLocal, restore_stack, admin, clean_throttles
):
    stack = restore_stack
    bs = stack.bootstrap_servers
    airflow_local.wait_for_dag(SWEEP, timeout=120)
    airflow_local.wait_for_dag(REASSIGN, timeout=120)
    airflow_local.unpause(REASSIGN)  # the sweep's runs stay queued while it is paused
    ours = add_balanceable_topics(admin, bs)
    on_dead_before = {
        (p.topic, p.partition): list(p.replicas) for p in admin.describe_partitions() if DEAD in p.replicas
    }
    stack.kill(f"broker-{DEAD}")
    wait_until(lambda: not (b := admin.describe_brokers().get(DEAD)) or b.fenced, 60, 1, "broker 4 fenced")

    # the sweep sees it and waits, then starts the reassignment once past the threshold
    conf = {
        # the first sweep sees the broker failed and waits: any threshold above 0 proves that
        "failure_threshold_minutes": 0.1,
        "alert_after_minutes": 0.1,
        "throttle_bytes_per_sec": 50_000,
        "max_partitions_per_chunk": 30,  # the biggest partitions come last: the bulky ones
    }
    runs_before = {r["dag_run_id"] for r in reassign_runs(airflow_local)}
    wait_run, log = sweep(airflow_local, conf)
    assert f"[broker {DEAD}]: wait because broker {DEAD} failed" in log
    # a "wait" starts nothing: the trigger skips itself (a short-circuit in the mapped group did not)
    assert (
        airflow_local.task_instance(SWEEP, wait_run, "cluster.start_reassignment", map_index=0)["state"]
        == "skipped"
    )
    assert {r["dag_run_id"] for r in reassign_runs(airflow_local)} == runs_before
    # the next sweep once the threshold has passed since the sweep first saw the broker failed (its
    # first-seen time is on the workers' clock: this machine's, as the test's); not a fixed sleep
    first_seen_ms = FailureStore("kafka_default", directory=FAILURES).load()[DEAD].first_seen_ms
    threshold_ms = conf["failure_threshold_minutes"] * 60_000
    wait_until(lambda: time.time() * 1000 > first_seen_ms + threshold_ms, 60, 0.2, "the failure threshold")
    sweep_run, log = sweep(airflow_local, conf)
    assert "DECISION sweep [brokers [4]]: start the reassignment" in log
    assert (
        airflow_local.task_instance(SWEEP, sweep_run, "cluster.start_reassignment", map_index=0)["state"]
        == "success"
    )
    started = wait_until(
        lambda: [r for r in reassign_runs(airflow_local) if r["dag_run_id"] not in runs_before],
        60,
        1,
        "the run",
    )
    run1 = started[0]["dag_run_id"]
    assert started[0]["conf"]["failed_brokers"] == [DEAD]

    # the approval is answered through the API; the summary is in the gate's body
    request = airflow_local.wait_for_approval(REASSIGN, run1, "approval_gate", timeout=400)
    body = request["body"].splitlines()
    assert "```" not in request["body"]  # Markdown tables, not a block the UI shows as one line
    assert "| broker | rack | replicas | preferred leaders | bytes |" in body, request["body"]
    assert any(line.startswith("| **4** (failed: registered, fenced) | rack-b |") for line in body), body
    assert any(line.startswith("| 1 of ") for line in body) and any(
        "Longest duration at the throttle" in x for x in body
    )
    airflow_local.answer(REASSIGN, run1, "approval_gate", [APPROVE_OPTION])

    # the execution task is killed in the middle of a chunk copying under its throttle: one seen
    # moving for 5 s (the bulky partitions' chunk, or any other that copies slowly; seen on a loaded
    # run: the bulky chunk done 3 s after its submission, before the kill landed, while an earlier
    # chunk had copied at the throttle for 4 minutes)
    first_seen: dict[int, float] = {}

    def chunk_copying_under_throttle():
        path = state_file(run1)
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        now = time.monotonic()
        for chunk in state["chunks"]:
            moving_throttled = chunk["status"] == "moving" and state["throttle"]
            if moving_throttled and now - first_seen.setdefault(chunk["index"], now) >= 5:
                return state
        return None

    moving = wait_until(chunk_copying_under_throttle, 600, 0.2, "a chunk copying under its throttle")
    submitted_run1 = {k for c in moving["chunks"] for k in c["moving"]}
    airflow_local.api(
        "PATCH", f"/dags/{REASSIGN}/dagRuns/{run1}/taskInstances/execute_chunks", json={"new_state": "failed"}
    )
    # Airflow says failed from here on, and its supervisor kills the try seconds later: a chunk the
    # killed try submits was recorded (its intent) before it last asked Airflow, so before now
    recorded_at_mark = {c["index"] for c in json.loads(state_file(run1).read_text())["chunks"] if c["moving"]}
    assert airflow_local.wait_for_run(REASSIGN, run1, timeout=300) == "failed"
    cleanup = airflow_local.task_instance(REASSIGN, run1, "remove_throttles")
    assert cleanup["state"] == "success", airflow_local.task_log_text(REASSIGN, run1, "remove_throttles")[
        -3000:
    ]
    # the kill landed mid-chunk: the executor takes its own throttle off when a chunk is verified, so a
    # throttle still recorded at the kill (taken off by the killed task's on_kill or by the cleanup task,
    # whichever came first) means the chunk was still moving (at 50 kB/s it takes ~30 s)
    killed_and_cleanup = airflow_local.task_log_text(
        REASSIGN, run1, "execute_chunks", try_number=1
    ) + airflow_local.task_log_text(REASSIGN, run1, "remove_throttles")
    assert "remove a leftover throttle" in killed_and_cleanup
    killed_submitted = {int(i) for i in re.findall(r"\[chunk (\d+)\]: submit", killed_and_cleanup)}
    assert killed_submitted and killed_submitted <= recorded_at_mark, (killed_submitted, recorded_at_mark)
    assert json.loads(state_file(run1).read_text())["throttle"] is None
    assert leftover_throttles(admin, [1, 2, 3], ours) == {}

    # re-run: clear the killed task (and what follows); it resumes from its state file
    airflow_local.api(
        "POST",
        f"/dags/{REASSIGN}/clearTaskInstances",
        json={
            "dry_run": False,
            "dag_run_id": run1,
            "task_ids": ["execute_chunks"],
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
        },
    )
    wait_until(lambda: airflow_local.dag_run(REASSIGN, run1)["state"] != "failed", 60, 1, "the run re-queued")
    state = airflow_local.wait_for_run(REASSIGN, run1, timeout=600)
    resumed_log = airflow_local.task_log_text(REASSIGN, run1, "execute_chunks", try_number=2)
    verify_log = airflow_local.task_log_text(REASSIGN, run1, "verify_result")
    # the DECISION lines last: CI keeps only the end of a failure's output
    decided = [line for line in (resumed_log + verify_log).splitlines() if "DECISION" in line]
    assert state == "success", (
        f"{airflow_local.task_instances(REASSIGN, run1)}\n{resumed_log[-3000:]}\n{verify_log[-2000:]}\n"
        + "\n".join(line[:1500] for line in decided[-8:])
    )
    assert "DECISION verify: healed" in verify_log
    # the approved preferred-leader election ran at the end of execute_chunks (behind its approval), and
    # the leaders were read back on the preferred replicas; verify_result only read
    assert "DECISION elect preferred leaders: leaders balanced" in resumed_log, resumed_log[-3000:]
    assert "DECISION elect preferred leaders" not in verify_log

    # nothing moved twice: the resumed task submitted nothing that the killed one had submitted
    final = json.loads(state_file(run1).read_text())
    assert final["finished"] and final["throttle"] is None
    started_before_kill = [c["index"] for c in moving["chunks"] if c["status"] != "pending"]
    assert started_before_kill
    resubmitted = [i for i in started_before_kill if f"[chunk {i}]: submit" in resumed_log]
    assert resubmitted == [], resubmitted
    again = {k for c in final["chunks"] if c["index"] in started_before_kill for k in c["moving"]}
    assert again == submitted_run1
    assert "every chunk done" in resumed_log

    # the result on the cluster
    parts = admin.describe_partitions()
    assert [p.name for p in parts if DEAD in p.replicas] == []
    assert [p.name for p in parts if set(p.isr) != set(p.replicas)] == []
    after = {(p.topic, p.partition): list(p.replicas) for p in parts}
    assert all(len(after[k]) == len(v) for k, v in on_dead_before.items() if k in after)
    assert leftover_throttles(admin, [1, 2, 3], sorted({p.topic for p in parts})) == {}
    new = Counter(b for k, v in on_dead_before.items() if k in after for b in set(after[k]) - set(v))
    assert set(new) <= {1, 2, 3} and max(new.values()) - min(new.values()) <= 1, new
    # the moved partitions are led by their (planned) preferred replicas
    moved = [p for p in parts if (p.topic, p.partition) in on_dead_before]
    assert [p.name for p in moved if p.leader != p.replicas[0]] == []
