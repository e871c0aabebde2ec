"""The chunked-reassignment DAG's tasks, built once for every runbook that moves replicas.

The failed-broker heal and the planned decommission run the same pipeline: check the input,
take the cluster's lease, validate against the cluster, finish an earlier run's moves,
snapshot, plan with the Spark job, review the plan, the plan-bound approval gate, the
throttled chunks (a reschedule sensor that also obeys the stop request, and, once every chunk
is done, makes the approved leader moves: a rebalance's leader-only reorders and the
preferred-leader election, each behind its own approval check), the all_done throttle
cleanup (which elects what a stopped or failed run moved, only with a valid approval), the
verification (it only reads) and the lease's release. Only the request differs (how
the params are parsed, which brokers are emptied, what is checked before the gate, the
gate's subject, the planner's flags), so a runbook names its functions and this module
builds the tasks: one wiring, not a copy per DAG.

The functions are named ``"module:function"`` and imported when the task runs, so parsing a
DAG file imports no more than before.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import Param, task

import kafka_runbooks_airflow.failed_broker  # noqa: F401 -- registers the gate's "reassign" action
from kafka_runbooks.failed_broker.chunk_silence import SILENT_BOUND_S
from kafka_runbooks.failed_broker.decommission import DEFAULT_MAX_DISK_USAGE_PERCENT
from kafka_runbooks.failed_broker.request import (
    DEFAULT_MAX_BYTES_PER_CHUNK,
    DEFAULT_MAX_PARTITIONS_PER_CHUNK,
    DEFAULT_THROTTLE_BYTES_PER_SEC,
)
from kafka_runbooks.units import exact_size
from kafka_runbooks_airflow.approvers import assigned_approvers
from kafka_runbooks_airflow.inputs import broker_list_schema, duration_schema, kafka_config_param, size_schema
from kafka_runbooks_airflow.lease import on_lease_held_param
from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator
from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator
from kafka_runbooks_airflow.operators.spark import SparkJobOperator
from kafka_runbooks_airflow.sensors.lease import lease_tasks
from kafka_runbooks_airflow.sensors.reassignment import KafkaReassignmentSensor
from kafka_runbooks_airflow.spark_connect import spark_job_path

CHECKED = "ti.xcom_pull(task_ids='validate')"
REVIEWED = "ti.xcom_pull(task_ids='review_plan')"


CLEANUP_RETRIES = 3  # the throttle cleanup's, spread over SILENT_BOUND_S


@dataclass(frozen=True)
class ReassignmentRunbook:
    """What one reassigning runbook brings to the shared pipeline.

    :param check_input: ``(dag_id, run_id, params) -> dict``: what needs no cluster, before the lease.
    :param request: ``(params) -> request``: the run's typed request, built once by the validate
        task (bad input: a ``refuse`` DECISION and a failed task, nothing read from the cluster);
        past it no glue function sees the params.
    :param validate: ``(request, kafka_config_id, dag_id, run_id) -> dict``: the request against
        the cluster (``kafka_runbooks_airflow.failed_broker.validate_request``'s result).
    :param review_plan: ``(checked, snapshot_info, dag_id, run_id) -> dict``: the plan checked,
        the gate's Markdown, the execution state written.
    :param subject: the gate's one-line question (Jinja; ``{reviewed}`` and ``{checked}`` stand
        for the review's and validate's XCom).
    :param plan_flags: extra arguments of ``spark_jobs/failed_broker_plan.py`` (``--drain``; Jinja
        allowed, e.g. validate's replica selection for ``--drain-replicas``).
    :param verify: ``(checked, kafka_config_id, dag_id, run_id) -> dict``: the end state read back
        (default: the heal's and the decommission's rule; a failed log dir's moves have their own);
        what the run asked for is validate's checked request, of the params only the cluster.
    """

    check_input: str
    request: str
    validate: str
    review_plan: str
    subject: str
    plan_flags: tuple[str, ...] = ()
    verify: str = "kafka_runbooks_airflow.failed_broker:verify_reassignment"


def call(target: str, *args: Any) -> Any:
    """Import ``"module:function"`` and call it (at run time: DAG parsing imports nothing more)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(*args)


def disk_ceiling_param() -> Param:
    """The disk ceiling of a planned move (decommission, log-dir failure, rebalance): one definition,
    its default the request's (``DEFAULT_MAX_DISK_USAGE_PERCENT``), so form and parser never disagree."""
    return Param(
        DEFAULT_MAX_DISK_USAGE_PERCENT,
        type="number",
        exclusiveMinimum=0,
        maximum=100,
        description="Refused before the gate if a receiver's log dir would be fuller than this after the "
        "plan (DescribeLogDirs total and usable bytes; a dir of unknown size is refused too).",
    )


def receivers_param(what_moves: str) -> Param:
    """Which brokers may receive the moved replicas; ``what_moves`` names the brokers they leave
    ('failed', 'drained'), which the request refuses as receivers."""
    return Param(
        "all",
        **broker_list_schema("all"),
        description="Brokers that may receive the moved replicas: 'all' live brokers, or broker "
        f"ids separated by commas, e.g. '1,2,3'. A receiver that is down or among the {what_moves} "
        "brokers is refused.",
    )


def chunk_params(what_moves: str | None, elect_after: str = "the moves") -> dict[str, Param]:
    """The params every reassigning runbook shares (receivers, chunks, throttle, gate, lease, election),
    in the forms' order. ``what_moves=None``: no receivers param (the rebalance picks its receivers by
    its mode); ``elect_after`` words the election param ('healing' for the heal)."""
    receivers = {"receivers": receivers_param(what_moves)} if what_moves else {}
    return receivers | _chunk_limit_params() | _run_params() | _after_moves_params(elect_after)


def _chunk_limit_params() -> dict[str, Param]:
    """How much moves at once and how fast; the defaults are the request's, shown with units."""
    return {
        "max_partitions_per_chunk": Param(
            DEFAULT_MAX_PARTITIONS_PER_CHUNK,
            type="integer",
            minimum=1,
            description="At most this many partitions are reassigned at once (one chunk); the next chunk starts "
            "when the previous one is fully in sync. Smaller chunks: less load, longer run.",
        ),
        "max_bytes_per_chunk": Param(
            exact_size(DEFAULT_MAX_BYTES_PER_CHUNK),
            **size_schema(),
            description="At most this much data per chunk, with a unit: e.g. '512 MiB', "
            "'1 GiB' (or a number of bytes). A partition bigger than this goes in a chunk of its own.",
        ),
        "throttle_bytes_per_sec": Param(
            exact_size(DEFAULT_THROTTLE_BYTES_PER_SEC),
            **size_schema(),
            description="Replication throttle per broker and second, with a unit: e.g. '50 MiB' (or "
            "bytes). Applies to leaders and followers of the moving partitions only; lower = gentler, slower.",
        ),
    }


def _run_params() -> dict[str, Param]:
    """Whether the run asks at the gate or only plans, which cluster, and what a held lease does."""
    return {
        "require_approval": Param(
            True,
            type="boolean",
            description="On: the run stops at an approval gate showing the plan before the first chunk moves. "
            "Off: the plan is executed at once, only where the deployment allows ungated runs "
            "(Variable kafka_runbooks_allow_ungated).",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            description="On: validate and plan only (the plan is in the review_plan log and the run's artifacts); "
            "nothing moves.",
        ),
        "kafka_config_id": kafka_config_param(),
        "on_lease_held": on_lease_held_param(),
    }


def _after_moves_params(elect_after: str) -> dict[str, Param]:
    """The preferred-leader election after the moves, and how long the gate waits for an answer."""
    return {
        "elect_preferred_leaders": Param(
            True,
            type="boolean",
            description=f"On: after {elect_after}, elect the preferred leaders of the moved partitions "
            "(approved with the plan; the gate says so) and read the leaders back, so leadership is balanced "
            "again at once. Off: leadership moves when the controller's auto leader rebalance gets to it.",
        ),
        "approval_timeout_s": Param(
            "12h",
            **duration_schema(minimum=1),
            description="How long the approval gate waits for an answer, e.g. '12h', '30m' (or a number of "
            "seconds); no answer by then fails the run.",
        ),
    }


def reassignment_tasks(runbook: ReassignmentRunbook, poke_interval_s: float) -> None:
    """Build the pipeline's tasks in the DAG being defined (call it inside ``with DAG(...)``)."""
    deciding = _deciding_tasks(runbook)
    ending = _ending_tasks(runbook)
    acquire_lease, release_lease = lease_tasks(poke_interval_s)
    checked = deciding["validate"]()
    deciding["check_input"]() >> acquire_lease >> checked
    moving = _moving_tasks(runbook, poke_interval_s)
    reviewed = deciding["review_plan"](checked, moving["snapshot"].output)
    anything_to_move = deciding["anything_to_move"](checked)
    anything_to_move >> moving["finish_earlier"] >> moving["snapshot"] >> moving["plan"] >> reviewed
    deciding["gate_or_go"](reviewed) >> moving["approval"] >> moving["execute"]
    cleanup = ending["remove_throttles"]()
    verified = ending["verify_result"](checked)
    moving["execute"] >> cleanup >> verified  # verified after the cleanup: no throttle may be left
    moving["execute"] >> verified  # and only when the execution itself succeeded
    [cleanup, verified] >> release_lease.as_teardown(setups=acquire_lease)


def _deciding_tasks(runbook: ReassignmentRunbook) -> dict[str, Any]:
    """The Python tasks up to the gate, each calling the runbook's own function for its step."""

    @task
    def check_input(params=None, run_id=None, dag_run=None) -> dict:
        """Bad input fails here, before the run waits for the cluster's lease (then it joins the queue)."""
        return call(runbook.check_input, dag_run.dag_id, run_id, dict(params))

    @task
    def validate(params=None, run_id=None, dag_run=None) -> dict:
        """Check the params against the cluster; nothing moves if anything is wrong."""
        from kafka_runbooks_airflow.gate import refuse_ungated_run

        refuse_ungated_run(dag_run.dag_id, bool(params["require_approval"]), bool(params["dry_run"]))
        request = call(runbook.request, dict(params))  # once, before any cluster call
        return call(runbook.validate, request, params["kafka_config_id"], dag_run.dag_id, run_id)

    @task.short_circuit
    def anything_to_move(checked: dict) -> bool:
        """Nothing to move: the run ends here, successfully."""
        return not checked["nothing_to_do"]

    @task(trigger_rule="all_done")
    def review_plan(checked: dict, snapshot_info: dict, run_id=None, dag_run=None) -> dict:
        """Independent check of the plan; the summary for the log and the gate; execution state."""
        return call(runbook.review_plan, checked, snapshot_info, dag_run.dag_id, run_id)

    @task.branch
    def gate_or_go(reviewed: dict) -> list[str]:
        """Dry runs stop after the plan; every other run goes through the gate (it asks, or
        records why no answer is needed: an ungated run the deployment allows)."""
        return [] if reviewed["dry_run"] else ["approval_gate"]

    return {
        "check_input": check_input,
        "validate": validate,
        "anything_to_move": anything_to_move,
        "review_plan": review_plan,
        "gate_or_go": gate_or_go,
    }


def _ending_tasks(runbook: ReassignmentRunbook) -> dict[str, Any]:
    """The Python tasks after the chunks: the throttles always come off, then the read-back."""

    @task(
        trigger_rule="all_done",
        retries=CLEANUP_RETRIES,
        retry_delay=timedelta(seconds=SILENT_BOUND_S / CLEANUP_RETRIES),
    )
    def remove_throttles(params=None, run_id=None, dag_run=None) -> dict:
        """Whatever happened (done, failed, stopped), this run's throttles come off (no approval: it
        puts back what the run set); a run that ended early having moved replicas gets the election of
        what it moved, behind its own approval check. A broker that did not answer keeps its rates
        (they live in the controller's metadata and are changed through the broker itself): the task
        tries again for as long as the executor waits for a crashed broker's supervisor
        (``SILENT_BOUND_S``), so a broker killed as the run ended is cleaned once it is back (campaign
        rebalance:12, round 3), not left to the next run. It runs after bad input too, so it reads its two
        values from the params instead of building the request (that would refuse the run a second time)."""
        from kafka_runbooks_airflow.failed_broker import remove_run_throttles

        elect = bool(params.get("elect_preferred_leaders", True))
        return remove_run_throttles(params["kafka_config_id"], elect, dag_run.dag_id, run_id)

    @task
    def verify_result(checked: dict, params=None, run_id=None, dag_run=None) -> dict:
        """Read the cluster back until the runbook's end state has held for the settle period (never
        shorter than the cluster's session timeout). It only reads: nothing is written here."""
        return call(runbook.verify, checked, params["kafka_config_id"], dag_run.dag_id, run_id)

    return {"remove_throttles": remove_throttles, "verify_result": verify_result}


def _moving_tasks(runbook: ReassignmentRunbook, poke_interval_s: float) -> dict[str, Any]:
    """The operators: earlier run's moves, snapshot, Spark plan, gate, chunked execution."""
    return {
        "finish_earlier": KafkaReassignmentSensor(
            task_id="finish_earlier_run",
            kafka_config_id="{{ params.kafka_config_id }}",
            state_file="adopt-state.json",
            poke_interval=poke_interval_s,
            timeout=timedelta(hours=24).total_seconds(),
        ),
        "snapshot": KafkaClusterSnapshotOperator(
            task_id="snapshot_cluster", kafka_config_id="{{ params.kafka_config_id }}"
        ),
        "plan": _plan_operator(runbook),
        "approval": PlanApprovalOperator(
            task_id="approval_gate",
            action_kind="reassign",
            subject=runbook.subject.replace("{reviewed}", REVIEWED).replace("{checked}", CHECKED),
            # Markdown tables: the UI renders them (a fenced block is shown as one run-on line)
            body="{{ " + REVIEWED + "['markdown'] }}",
            response_timeout=timedelta(hours=12),
            assigned_users=assigned_approvers(),  # KAFKA_RUNBOOKS_APPROVERS; unset = role-based only
        ),
        "execute": KafkaReassignmentSensor(
            task_id="execute_chunks",
            kafka_config_id="{{ params.kafka_config_id }}",
            state_file="exec-state.json",
            approval_gate_task_id="approval_gate",  # refuses to move anything without an approval of its plan
            poke_interval=poke_interval_s,
            timeout=timedelta(hours=72).total_seconds(),
        ),
    }


def _plan_operator(runbook: ReassignmentRunbook) -> SparkJobOperator:
    """The Spark planner over the snapshot, with validate's brokers and the runbook's own flags."""
    return SparkJobOperator(
        task_id="plan_reassignment",
        application=spark_job_path("failed_broker_plan.py"),
        conn_id="spark_default",
        name="kafka-failed-broker-plan",
        application_args=[
            "--snapshot",
            "{{ ti.xcom_pull(task_ids='snapshot_cluster')['path'] }}",
            "--failed",
            "{{ " + CHECKED + "['failed_csv'] }}",
            "--receivers",
            "{{ " + CHECKED + "['receivers_csv'] }}",
            "--max-partitions-per-chunk",
            "{{ params.max_partitions_per_chunk }}",
            "--max-bytes-per-chunk",
            "{{ " + CHECKED + "['max_bytes_per_chunk'] }}",
            "--out",
            "{{ " + CHECKED + "['plan_dir'] }}",
            *runbook.plan_flags,
        ],
    )
