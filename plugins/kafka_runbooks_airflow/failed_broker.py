"""Task bodies of the failed-broker DAGs (sweep and reassignment): thin glue over the library.

Everything that decides lives in ``kafka_runbooks.failed_broker`` (the run's decisions in
``kafka_runbooks.failed_broker.runbook``); here the params become a request, the state files
get their places (one folder per run, ``reassign/<dag>/<run>/``, in the data store: a run's
tasks may run on different workers), and results become XCom-sized dicts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions, storage
from kafka_runbooks import failed_broker as failed_broker_dags
from kafka_runbooks.errors import BadInput, RunbookFailed
from kafka_runbooks.failed_broker.sweep import SWEEP_DEFAULTS, SWEEP_ENV_PREFIX, SWEEP_VARIABLE, SweepSettings
from kafka_runbooks.fleet import RENAMED_PARAMS, config_id_of
from kafka_runbooks.paths import safe_name
from kafka_runbooks.settings import layered_settings
from kafka_runbooks.storage import StorePath
from kafka_runbooks.units import format_duration
from kafka_runbooks_airflow.gate import gate_action, run_xcom
from kafka_runbooks_airflow.notify import notify_broker_alerts
from kafka_runbooks_airflow.run_state import (
    ADOPT_STATE,
    EXEC_STATE,
    REASSIGN_DAG_ID,
    mark_cluster,
    run_dir,
    state_files,
    stop_request_file,
)

if TYPE_CHECKING:
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.failed_broker.failures import Assessment, FailureTracker, Thresholds
    from kafka_runbooks.failed_broker.offline_dirs import DirAssessment, OfflineDirTracker
    from kafka_runbooks.failed_broker.request import ReassignRequest

DECOMMISSION_DAG_ID = "kafka_broker_decommission"
LOG_DIR_FAILURE_DAG_ID = "kafka_log_dir_failure"
# every DAG that moves replicas with the chunked executor: one stop request reaches them all
REASSIGNING_DAG_IDS = failed_broker_dags.REASSIGNING_DAG_IDS

log = logging.getLogger("kafka_runbooks.failed_broker")


def reassignment_active_on(ti, cluster: str, dag_ids: tuple[str, ...] = REASSIGNING_DAG_IDS) -> list[str]:
    """Reassignment runs (of ``dag_ids``) going on for ``cluster``: the lease's holder, the runs
    waiting for its lease (a manual run behind a restart), and the runs the sweep started for it
    that are still queued or running (they may be waiting for the lease; the heal's and the
    log-dir failure's). A heal's run id is returned bare, another DAG's as ``<dag_id>/<run_id>``."""
    from kafka_runbooks.failed_broker.failures import FailureStore
    from kafka_runbooks.failed_broker.offline_dirs import OfflineDirStore
    from kafka_runbooks.lease import LeaseRecord
    from kafka_runbooks_airflow.lease import ACTIVE_RUN_STATES, lease_queue, lease_store

    runs = {
        (REASSIGN_DAG_ID, e.triggered_run_id)
        for e in FailureStore(cluster).load().values()
        if e.triggered_run_id
    }
    if LOG_DIR_FAILURE_DAG_ID in dag_ids:  # the log-dir runs the sweep started (queued ones too)
        runs.update(
            (LOG_DIR_FAILURE_DAG_ID, e.triggered_run_id)
            for e in OfflineDirStore(cluster).load().values()
            if e.triggered_run_id
        )
    for dag_id in dag_ids:
        runs.update((dag_id, r) for r in lease_queue().runs(cluster, dag_id))
    text = lease_store().read(cluster)
    if text:
        holder = LeaseRecord.from_json(text)
        if holder.dag_id in dag_ids:
            runs.add((holder.dag_id, holder.run_id))
    active = []
    for dag_id, run_id in sorted(r for r in runs if r[0] in dag_ids):
        try:
            raw = ti.get_dagrun_state(dag_id, run_id)
        except Exception as exc:  # never created, or deleted
            log.info("run %s/%s not found (%s): not active", dag_id, run_id, exc)
            continue
        if str(getattr(raw, "value", raw)) in ACTIVE_RUN_STATES:
            active.append(run_id if dag_id == REASSIGN_DAG_ID else f"{dag_id}/{run_id}")
    return active


# ------------------------------------------------------------------ settings of the sweep


def sweep_settings(params: dict[str, Any], variable: str | None) -> dict[str, Any]:
    """Run params (when not null) > Variable ``kafka_failed_broker_sweep`` (JSON) >
    env ``KAFKA_RUNBOOKS_FAILED_BROKER_<KEY>`` > defaults: the sweeps' one rule."""
    return layered_settings(
        SWEEP_DEFAULTS, params, variable, variable_name=SWEEP_VARIABLE, env_prefix=SWEEP_ENV_PREFIX
    )


@dataclass
class SweepReading:
    """One read of a cluster as both trackers saw it (one answer, one clock), and the heal's runs."""

    assessment: Assessment  # failed brokers
    dirs: DirAssessment  # offline log dirs of live brokers
    dir_tracker: OfflineDirTracker  # to mark a started run
    heal_tracker: FailureTracker  # to mark a started run
    heal_active: list[str]  # runs of the heal active on the cluster


def run_sweep(settings: SweepSettings, conn_id: str, run_id: str, ti) -> dict[str, Any]:
    """Read the cluster ``conn_id`` once, track failed brokers and offline log dirs, decide what to start.

    The order is the contract (each step is its own function so it can be read alone): the settings
    (``checked_sweep_settings``, read and parsed once from the params by the task: a bad one failed
    the sweep there, where alerts fire) come before the cluster is read, one read feeds both trackers,
    and the dead broker's heal is decided before a log dir's run, which never starts while a broker
    is failed. One sweep run covers every cluster: the cluster is in the started run's id."""
    reading = read_and_track(conn_id, settings.thresholds, ti)
    notify_broker_alerts(conn_id, reading.assessment)
    started_id = f"sweep__{safe_name(conn_id)}__{safe_name(run_id)}"
    return {
        "assessment": reading.assessment.as_dict(),
        "log_dirs": reading.dirs.as_dict(),
        "settings": dict(settings.given),
        **decide_heal(reading, settings, conn_id, started_id),
        **decide_log_dir_run(reading, settings, conn_id, started_id, ti),
    }


def checked_sweep_settings(params: dict[str, Any]) -> SweepSettings:
    """The sweep's settings, typed; a sweep set to start ungated runs fails here, before it reads the
    cluster, unless the deployment allows them (who may remove the gate is the deployment's decision),
    and so does a bad threshold or size."""
    from airflow.sdk import Variable

    given = sweep_settings(params, Variable.get(SWEEP_VARIABLE, default=None))
    if not given["require_approval"]:
        from kafka_runbooks_airflow.gate import refuse_ungated_run

        refuse_ungated_run(REASSIGN_DAG_ID, False, False)  # fails until the setting is fixed
    return SweepSettings.from_given(given)


def _stopped(dag_id: str):
    """Run id -> how that run of ``dag_id`` was stopped on purpose (None: it was not): a sweep never
    starts the same failure's run again after an operator stopped it."""
    from kafka_runbooks.failed_broker.stop import stopped_on_purpose

    return lambda run_id: stopped_on_purpose([run_dir(dag_id, run_id) / n for n in (ADOPT_STATE, EXEC_STATE)])


def read_and_track(conn_id: str, thresholds: Thresholds, ti) -> SweepReading:
    """One read of the cluster, with every available broker's DescribeLogDirs answer (an unanswered one
    is unknown, never healthy), through both trackers; the heal's leftover throttles come off when no
    heal runs."""
    from kafka_runbooks.failed_broker.failures import FailureStore, FailureTracker
    from kafka_runbooks.failed_broker.offline_dirs import (
        OfflineDirStore,
        OfflineDirTracker,
        read_with_log_dirs,
    )
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    tracker = FailureTracker(
        FailureStore(conn_id), thresholds, logger=log, stopped_runs=_stopped(REASSIGN_DAG_ID)
    )
    dir_tracker = OfflineDirTracker(
        OfflineDirStore(conn_id), thresholds, logger=log, stopped_runs=_stopped(LOG_DIR_FAILURE_DAG_ID)
    )
    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        state = read_with_log_dirs(admin)
        assessment = tracker.observe(state)
        dirs = dir_tracker.observe(state)
        active = reassignment_active_on(ti, conn_id, (REASSIGN_DAG_ID,))
        if not active:
            clean_leftover_throttles(admin, REASSIGN_DAG_ID, cluster=conn_id)
    finally:
        admin.close()
    return SweepReading(assessment, dirs, dir_tracker, tracker, active)


def decide_heal(
    reading: SweepReading, settings: SweepSettings, conn_id: str, started_id: str
) -> dict[str, Any]:
    """Start ``kafka_failed_broker_reassignment`` for the brokers past the threshold, unless a heal
    already runs on the cluster (one at a time): its ``trigger``, ``run_id`` and ``conf``."""
    assessment, active = reading.assessment, reading.heal_active
    out: dict[str, Any] = {"trigger": False, "conf": {}, "run_id": started_id}
    if not assessment.due:
        return out
    if active:
        decisions.record(
            "sweep",
            "do not start another reassignment",
            f"run(s) {active} of {REASSIGN_DAG_ID} are already active on cluster {conn_id}; "
            "one reassignment per cluster at a time",
            subject=f"brokers {assessment.due}",
            logger=log,
        )
        return out
    conf = {
        "failed_brokers": assessment.due,
        "receivers": "all",
        **settings.passed_on(),
        "dry_run": False,
        "kafka_config_id": conn_id,
    }
    reading.heal_tracker.mark_triggered(assessment.due, started_id)
    decisions.record(
        "sweep",
        "start the reassignment",
        f"broker(s) {assessment.due} failed more than {format_duration(settings.thresholds.failure_threshold_s)} ago and "
        f"are still failed; {len(assessment.failed)} of {assessment.brokers} brokers failed is not an outage",
        subject=f"brokers {assessment.due}",
        observed={"failed": assessment.as_dict()["failed"]},
        action=f"trigger {REASSIGN_DAG_ID} run {started_id} with {conf}",
        logger=log,
    )
    return {**out, "trigger": True, "conf": conf}


def decide_log_dir_run(
    reading: SweepReading, settings: SweepSettings, conn_id: str, started_id: str, ti
) -> dict[str, Any]:
    """Start ``kafka_log_dir_failure`` for one live broker whose offline log dirs are past the threshold,
    only where ``start_log_dir_failure`` allows it (off: alert only), no broker is failed (the dead
    broker's heal goes first) and no reassignment of any kind runs on the cluster: its
    ``log_dir_trigger``, ``log_dir_run_id`` and ``log_dir_conf``."""
    from kafka_runbooks.failed_broker.offline_dirs import choose_log_dir_start

    out: dict[str, Any] = {"log_dir_trigger": False, "log_dir_conf": {}, "log_dir_run_id": started_id}
    start = choose_log_dir_start(
        reading.dirs,
        sorted(reading.assessment.failed),
        lambda: reassignment_active_on(ti, conn_id),
        settings.start_log_dir_failure,
        logger=log,
    )
    if start is None:
        return out
    conf = start.conf(conn_id, settings.passed_on())
    reading.dir_tracker.mark_triggered(start.broker_id, started_id)
    start.record(started_id, conf, settings.thresholds.failure_threshold_s, logger=log)
    return {**out, "log_dir_trigger": True, "log_dir_conf": conf}


# ------------------------------------------------------------------ the reassignment run


def owned_in_flight(
    dag_id: str, cluster: str | None = None, cluster_id: str | None = None
) -> dict[str, tuple[list[int], StorePath]]:
    """Partitions some run of this runbook submitted on ``cluster`` (the connection; of the cluster
    ``cluster_id`` when given) and has not seen finish."""
    from kafka_runbooks.failed_broker.execute import load_state

    owned: dict[str, tuple[list[int], StorePath]] = {}
    for path in state_files(dag_id, cluster):
        try:
            state = load_state(path)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable state file %s: %s", path, exc)
            continue
        if _another_clusters(state, cluster_id, path):
            continue
        for k, target in state.in_flight_targets().items():
            owned[k] = (target, path)
    return owned


def clean_leftover_throttles(
    admin: ClusterAdmin, dag_id: str, only: list[StorePath] | None = None, cluster: str | None = None
) -> dict[str, Any]:
    """Take off throttles that runs recorded and did not remove (a killed task, a dead worker).

    Called when no run of the runbook is active on ``cluster`` (the lease says so), or for
    this run's own files, so every recorded throttle is a leftover.
    """
    from kafka_runbooks.failed_broker.execute import ChunkExecutor, claim, fenced_checkpoint, load_state

    left: dict[str, Any] = {}
    for path in only if only is not None else state_files(dag_id, cluster):
        if not path.exists() or load_state(path).throttle is None:
            continue
        if load_state(path).cluster_id and _another_clusters(load_state(path), admin.ping(), path):
            continue
        # claimed first: a killed task still running (Airflow lets it, for a few seconds) acts no more
        state = claim(path, f"throttle cleanup of {path.parent.name}")
        if state.throttle is None:
            continue
        decisions.record(
            "throttle",
            "remove a leftover throttle",
            f"{path.parent.name} recorded a throttle it did not remove (stopped, failed or killed)",
            observed={"state_file": str(path)},
            logger=log,
        )
        live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
        executor = ChunkExecutor(admin, logger=log, checkpoint=fenced_checkpoint(path, state.fence))
        remaining = executor.remove_throttle(state, live)
        if remaining:
            left[str(path)] = remaining
    return left


@contextmanager
def refused_as_decision():
    """A RequestError found against the cluster (a reassignment in flight that is not ours) leaves
    as the same ``refuse the run`` DECISION record (ERROR) as bad params, before it fails the task."""
    from kafka_runbooks.failed_broker.request import RequestError

    try:
        yield
    except RequestError as exc:
        decisions.record(
            "validate", "refuse the run: nothing was done", str(exc), logger=log, level=logging.ERROR
        )
        raise


def upstream_result_or_skip(value: Any, task_id: str, what: str) -> Any:
    """The XCom of an upstream task, or a failure naming the task whose failure is the real error.

    ``review_plan`` runs whatever happened upstream (it reports an impossible plan); when
    ``validate`` or the snapshot failed there is nothing to review, and a TypeError on a
    missing XCom would only hide the real error under noise. It fails, never skips: a skip here
    skipped the gate, the chunks and the verification, and the run ended green with nothing done
    (the fault campaign's heal seed 4: the snapshot task killed, the run a success). (A run with
    nothing to move never gets here: ``anything_to_move`` skips the review before it runs.)
    """
    if value is not None:
        return value
    from airflow.sdk.exceptions import AirflowFailException

    reason = f"{task_id} did not finish ({what} is missing): its log holds the real error; nothing to review"
    decisions.record("plan", "the run failed earlier", reason, logger=log, level=logging.ERROR)
    raise AirflowFailException(reason)


def validate(request: ReassignRequest, kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """The heal's validate: the failed brokers and receivers chosen the heal's way (``resolve``:
    named or detected brokers that are down, live receivers); the decommission, the log-dir
    failure and the rebalance call ``validate_request`` with their own choice."""
    from kafka_runbooks.failed_broker.request import resolve

    return validate_request(request, kafka_config_id, dag_id, run_id, resolve)


def reassign_request(params: Mapping[str, Any], parse=None) -> ReassignRequest:
    """The run's params as the library's request (``parse``, default the heal's ``build_request``),
    built once by the validate task and before any cluster call: a bad one fails the task with a
    decision record, nothing moved."""
    from kafka_runbooks.failed_broker.request import build_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    return refuse_bad_input(parse or build_request, params, log.name)


def validate_request(
    request: ReassignRequest,
    kafka_config_id: str,
    dag_id: str,
    run_id: str,
    choose,
    moving: Iterable[tuple[str, int]] | None = None,
) -> dict[str, Any]:
    """The request against the cluster ``kafka_config_id`` before anything moves: the brokers to
    empty and the receivers as ``choose`` ((request, ClusterState) -> (brokers, receivers)) picks
    them, the runbook's checks, adoption prepared, the checked values as XCom. ``moving``: the
    partitions a selection moves (the log-dir failure's failed dir), whose replication factor the
    receivers must be able to hold (the heal's and the drain's own choice checks theirs). A
    RequestError is the run's ``refuse`` DECISION."""
    from kafka_runbooks.failed_broker import runbook
    from kafka_runbooks.failed_broker.execute import ChunkState, ExecState, save_state

    state, failed, receivers, inflight, floor = _read_for_validate(
        request, kafka_config_id, dag_id, _held_by_receivers(choose, moving)
    )
    owned = owned_in_flight(dag_id, kafka_config_id, state.cluster_id)
    with refused_as_decision():
        checked = runbook.validate(request, state, failed, receivers, inflight, owned)
    folder = run_dir(dag_id, run_id)
    mark_cluster(folder, kafka_config_id)
    save_state(
        folder / ADOPT_STATE,
        ExecState(
            run_id=run_id,
            failed_brokers=failed,
            throttle_bytes_per_sec=request.throttle_bytes_per_sec,
            chunks=[ChunkState(index=0, targets=checked.adopt)] if checked.adopt else [],
            drain=request.drain,
            cluster_id=state.cluster_id,
        ),
    )
    checked.record(request, log)
    return {
        **request.as_dict(),
        "nothing_to_do": checked.nothing_to_do,
        "cluster_id": state.cluster_id,
        "failed": failed,
        "failed_csv": ",".join(str(b) for b in failed),
        "receivers": receivers,
        "receivers_csv": ",".join(str(b) for b in receivers),
        "adopted": len(checked.adopt),
        "plan_dir": str(folder / "plan"),
        "throttle_floor": floor,  # the gate says when the throttle is below what Kafka holds
    }


def _held_by_receivers(choose, moving: Iterable[tuple[str, int]] | None):
    """``choose``, then, for a selection of partitions (``moving``), the refusal of receivers that
    cannot hold their replication factor, before the gate (the planner would refuse after the snapshot)."""
    if moving is None:
        return choose
    from kafka_runbooks.failed_broker.request import refuse_receivers_short

    keys = {f"{t}:{p}" for t, p in moving}

    def checked(request, state):
        """The runbook's choice of brokers, whose receivers must hold what the selection moves."""
        failed, receivers = choose(request, state)
        refuse_receivers_short(state, failed, receivers, keys=keys, drain=True)
        return failed, receivers

    return checked


def _read_for_validate(
    request: ReassignRequest, kafka_config_id: str, dag_id: str, choose
) -> tuple[Any, list, list, Any, dict | None]:
    """One connection for validate's reads: the cluster, the brokers to empty and the receivers
    (``choose``'s refusal is the run's), leftover throttles removed, the reassignments in flight."""
    from kafka_runbooks.failed_broker import runbook
    from kafka_runbooks_airflow.acl_check import require_acls
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        require_acls(admin, dag_id, kafka_config_id)  # before the first write (leftover throttles)
        state = admin.read_state(include_log_dirs=False)
        failed, receivers = refuse_bad_input(lambda _: choose(request, state), {}, log.name)
        if not request.dry_run:
            # this run holds the cluster's lease: no other run executes here, recorded throttles are
            # leftovers (a dry run holds no lease: another run may be moving data right now). Every
            # reassigning runbook's: a throttle a decommission left on a broker that was dead at its
            # cleanup comes off at the next heal (or any other) once that broker answers again
            for each in REASSIGNING_DAG_IDS:
                clean_leftover_throttles(admin, each, cluster=kafka_config_id)
        return state, failed, receivers, runbook.in_flight(admin), _throttle_floor(admin, receivers)
    finally:
        admin.close()


def _throttle_floor(admin, receivers: list[int]) -> dict[str, Any] | None:
    """The receivers' own settings that bound the lowest throttle Kafka holds (the gate warns below
    it); None when none answered (read-only, DescribeConfigs of each receiver)."""
    from kafka_runbooks.failed_broker.throttle_floor import FLOOR_KEYS, floor_from

    values, _ = admin.broker_configs(receivers, list(FLOOR_KEYS))
    floor = floor_from(values)
    return floor.as_dict() if floor else None


def review_plan(
    checked: dict[str, Any] | None,
    snapshot_info: dict[str, Any] | None,
    dag_id: str,
    run_id: str,
) -> dict[str, Any]:
    """Load the Spark plan, check it independently, log the summary, write the execution state."""
    from kafka_runbooks.failed_broker import runbook
    from kafka_runbooks.failed_broker.execute import ExecState, chunks_from_plan_dir, save_state
    from kafka_runbooks.failed_broker.plan import read_snapshot_rows
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE

    checked = upstream_result_or_skip(checked, "validate", "the validated request")
    snapshot_path = upstream_result_or_skip(snapshot_info, "snapshot_cluster", "the snapshot")["path"]
    plan_dir = storage.locate(checked["plan_dir"])
    plan = _load_plan(plan_dir)
    summary = json.loads((plan_dir / SUMMARY_FILE).read_text())
    markdown = _plan_markdown(checked, summary, plan_dir)
    runbook.review(plan, *read_snapshot_rows(snapshot_path), summary, log)
    log.info("reassignment plan:\n%s", markdown)
    path = run_dir(dag_id, run_id) / EXEC_STATE
    if not checked["dry_run"]:
        save_state(
            path,
            ExecState(
                run_id=run_id,
                failed_brokers=list(checked["failed"]),
                throttle_bytes_per_sec=int(checked["throttle_bytes_per_sec"]),
                chunks=chunks_from_plan_dir(plan_dir),
                drain=bool(checked.get("drain")),
                cluster_id=checked.get("cluster_id"),
            ),
        )
    return {
        "partitions": summary["partitions"],
        "bytes": summary["bytes"],
        "chunks": len(summary["chunks"]),
        "replicas": sum(summary.get("moved_per_receiver", {}).values()),
        "markdown": markdown,
        "dry_run": checked["dry_run"],
        "require_approval": checked["require_approval"],
    }


def _plan_markdown(checked: dict[str, Any], summary: dict[str, Any], plan_dir: StorePath) -> str:
    """The plan as the review log and the gate show it: a replication-factor change has its own table."""
    from kafka_runbooks.failed_broker.report import plan_markdown

    throttle = int(checked["throttle_bytes_per_sec"])
    if summary.get("rebalance") == "replication-factor":
        from kafka_runbooks.replication_factor import rf_markdown

        return rf_markdown(summary, throttle, str(plan_dir))
    elect = bool(checked.get("elect_preferred_leaders", True))
    floor = checked.get("throttle_floor")
    return plan_markdown(summary, throttle, str(plan_dir), elect, checked.get("failed_dirs") or (), floor)


def _load_plan(plan_dir: StorePath) -> Any:
    """The planner's plan; an impossible one is the run's ``refuse`` DECISION, a missing one points
    at the planning job's log (a traceback about a file would hide where the error is)."""
    from kafka_runbooks.failed_broker.plan import PlanImpossible, load_plan

    try:
        return load_plan(plan_dir)
    except PlanImpossible as exc:
        decisions.record("plan", "refuse", f"no plan can do this: {exc}", logger=log, level=logging.ERROR)
        raise
    except FileNotFoundError as exc:
        raise RunbookFailed(
            f"the planning job wrote no plan in {plan_dir} (see the plan_reassignment log): {exc}"
        ) from exc


def verify_reassignment(checked: dict[str, Any], kafka_config_id: str, dag_id: str, run_id: str) -> dict:
    """After the last chunk: the cluster read back until the "healed" rule holds for a settle period
    that can see a death (never shorter than ``broker.session.timeout.ms``; its last read asks the
    leaders and ISR members themselves). It only reads: the approved election ran at the end of
    ``execute_chunks`` (``leader_moves``). What the run asked for (brokers, drain) is validate's
    checked request."""
    from kafka_runbooks.failed_broker import runbook
    from kafka_runbooks.failed_broker.throttle import leftover_throttles
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.verify_settings import partitions_ask, verify_settle

    planned = _planned_targets(dag_id, run_id)
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    drain = bool(checked.get("drain"))

    def read():
        """One read of the cluster and the throttles still set; with a drain, the drained brokers' own log
        dir report (DescribeLogDirs)."""
        state = admin.read_state(include_log_dirs=False)
        if drain:  # the drained brokers' own word on what their log dirs still hold
            state.log_dir_states, state.log_dir_errors = admin.describe_log_dir_states(checked["failed"])
        left = leftover_throttles(
            admin, state.alive_broker_ids(), sorted({p.topic for p in state.partitions})
        )
        return state, left

    try:
        healed = runbook.await_healed(
            read,
            set(checked["failed"]),
            planned,
            **verify_settle(admin, "verify", log),
            ask=partitions_ask(admin, lambda answer: answer[0].partitions),
            logger=log,
            drain=drain,
        )
    finally:
        admin.close()
    return {"healed": True, "partitions": healed.partitions}


def _planned_targets(dag_id: str, run_id: str) -> dict[str, list[int]]:
    """Every chunk's targets from the run's execution state (none: the run planned no move)."""
    from kafka_runbooks.failed_broker.execute import load_state

    state_path = run_dir(dag_id, run_id) / EXEC_STATE
    planned: dict[str, list[int]] = {}
    if state_path.exists():
        for chunk in load_state(state_path).chunks:
            planned.update(chunk.targets)
    return planned


def remove_run_throttles(
    kafka_config_id: str, elect: bool, dag_id: str, run_id: str, context=None
) -> dict[str, Any]:
    """The all_done cleanup: whatever happened to the run, its throttles come off (a restoring write:
    no approval needed). With ``elect`` (the run's ``elect_preferred_leaders``), a run that ended
    early having moved replicas gets the election of what it moved, behind its own approval check
    (``leader_moves.after_stop``; ``context``: the task's, read when an election is due)."""
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.leader_moves import after_stop

    folder = run_dir(dag_id, run_id)
    context_of = _current_context if context is None else (lambda: context)
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        left = clean_leftover_throttles(admin, dag_id, only=[folder / ADOPT_STATE, folder / EXEC_STATE])
        leaders = {
            path.name: after_stop(admin, path, elect, context_of, log)
            for path in (folder / ADOPT_STATE, folder / EXEC_STATE)
            if path.exists()
        }
    finally:
        admin.close()
    if left:
        raise RunbookFailed(f"throttles could not be removed (the next run or sweep will retry): {left}")
    return {"left": left, "leaders": {k: v for k, v in leaders.items() if v}}


def _current_context():
    """The running task's context (the approval check reads the run's gate record and the task's start)."""
    from airflow.sdk import get_current_context

    return get_current_context()


def _progress_file(path: StorePath) -> StorePath:
    """progress.json beside exec-state.json (the Kafka page reads it), adopt-progress.json beside adopt-state.json."""
    return path.parent / (
        "progress.json" if path.name == EXEC_STATE else path.name.replace("state", "progress")
    )


# ------------------------------------------------------------------ stopping a reassignment

STOP_DAG_ID = "kafka_reassignment_stop"


def stop_run_state(
    admin,
    state,
    path: StorePath,
    request,
    progress_file: StorePath | None,
    run_id: str,
    logger,
    checkpoint=None,
) -> dict:
    """The executing task stops its own run: cancel, throttle off, read back, acknowledge.

    Returns what is left on the cluster (empty: stopped and verified)."""
    import time

    from kafka_runbooks.failed_broker import progress
    from kafka_runbooks.failed_broker.execute import save_state
    from kafka_runbooks.failed_broker.stop import (
        acknowledge,
        final_progress,
        request_path,
        stop,
        verify_stopped,
    )

    checkpoint = checkpoint or (lambda s: save_state(path, s))
    done = stop(admin, state, request, checkpoint=checkpoint, logger=logger)
    left = verify_stopped(
        admin, {run_id: (state, done["throttle"])}, **stop_settle(admin, [state], 5.0, logger)
    )
    progress.write(progress_file, final_progress(state, time.time()))
    _record_stopped(f"run {run_id}", request, done, left, logger)
    # the run's folder is in the runbook's state directory, next to the stop/ requests
    acknowledge(request_path(path.parent.parent, request.kafka_config_id), run_id, int(time.time() * 1000))
    return left


def _record_stopped(what: str, request, done: dict, left: dict, logger) -> None:
    decisions.record(
        "stop",
        "stopped" if not left else "NOT fully stopped",
        "read back from the cluster: none of the run's reassignments in flight, none of its throttle "
        "configs set, still so after a settle period"
        if not left
        else "read back from the cluster after the cancel and the throttle removal: see observed",
        subject=what,
        observed={"cancelled": len(done.get("cancelled", [])), "errors": done.get("errors"), "left": left},
        logger=logger,
        level=logging.WARNING if not left else logging.ERROR,
    )


def request_stop(params: dict[str, Any], run_id: str, user: str | None, active_runs: int) -> dict[str, Any]:
    """Write the stop request of a Kafka connection (the executing task reads it at every step)."""
    import time
    from dataclasses import asdict

    from kafka_runbooks.failed_broker.stop import StopRequest, write_request

    conn_id = str(params.get("kafka_config_id") or "").strip()
    reason = str(params.get("reason") or "").strip()
    renamed = [old for old in RENAMED_PARAMS if old in params]
    if renamed or not conn_id or not reason:
        why = (
            f"renamed params: {', '.join(f'{o} is now {RENAMED_PARAMS[o]}' for o in renamed)}"
            if renamed  # read as unknown, the old name would stop kafka_default's reassignments
            else "a Kafka connection id and a reason are required (the reason is recorded with the stop)"
        )
        decisions.record(
            "validate", "refuse the stop: nothing was done", why, logger=log, level=logging.ERROR
        )
        raise BadInput(why)
    request = StopRequest(
        kafka_config_id=conn_id,
        by=user or "an unknown user",
        reason=reason,
        requested_at_ms=int(time.time() * 1000),
        request_id=run_id,
    )
    paths = [stop_request_file(dag_id, conn_id) for dag_id in REASSIGNING_DAG_IDS]
    for each in paths:  # each reassigning DAG's executing task reads its own folder's request
        write_request(each, request)
    path = paths[0]
    decisions.record(
        "stop",
        "ask the reassignment to stop",
        f"{request.text}; the executing task stops at its next step, or this runbook stops what is "
        "recorded in flight itself when no task is executing",
        subject=f"connection {conn_id}",
        observed={"active_runs": active_runs, "request_file": str(path)},
        action=f"write the stop request {path.name}",
        logger=log,
        level=logging.WARNING,
    )
    return {
        "request": asdict(request),
        "path": str(path),
        "paths": [str(p) for p in paths],
        "active_runs": active_runs,
    }


def _another_clusters(state, cluster_id: str | None, path) -> bool:
    """A run planned on another cluster behind the same connection id: left alone, and said so."""
    if not state.of_another_cluster(cluster_id):
        return False
    decisions.record(
        "state",
        "leave alone: another cluster's run",
        f"{path.parent.name} was planned on cluster {state.cluster_id}; this connection reaches cluster "
        f"{cluster_id} now (rebuilt or repointed): its moves, orders and throttles are not this cluster's",
        observed={"state_file": str(path)},
        logger=log,
        level=logging.WARNING,
    )
    return True


def _states(conn_id: str, cluster_id: str | None = None) -> dict[str, tuple[StorePath, Any]]:
    from kafka_runbooks.failed_broker.execute import load_state

    out = {}
    paths = [p for dag_id in REASSIGNING_DAG_IDS for p in state_files(dag_id, cluster=conn_id)]
    for path in paths:  # unmarked old runs count for any
        try:
            state = load_state(path)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable state file %s: %s", path, exc)
            continue
        if _another_clusters(state, cluster_id, path):
            continue
        dag = path.parent.parent.name
        prefix = "" if dag == REASSIGN_DAG_ID else f"{dag}/"  # the heal's names stay as they were
        out[f"{prefix}{path.parent.name}/{path.name}"] = (path, state)
    return out


def wait_for_executing_task(
    requested: dict[str, Any], active_runs, wait_s: float, poll_s: float = 5.0, sleep=None
) -> dict[str, Any]:
    """Give a task that is executing the chance to stop its own run (it knows what it has in flight
    this second); when none answers within ``wait_s`` (worker dead, run killed), the next task stops
    what the state files record."""
    import time

    sleep = sleep or time.sleep
    conn_id = config_id_of(requested["request"])
    deadline = time.monotonic() + wait_s
    while True:
        acknowledged = _acknowledged(requested)
        if acknowledged:  # first: the task may have stopped before this task began
            decisions.record(
                "stop",
                "the executing task stopped its run",
                "it cancelled what it had in flight and took its throttle off (see its log); "
                "the next task reads the cluster back",
                observed={"acknowledged": acknowledged},
                logger=log,
            )
            return {"acknowledged": acknowledged}
        moving = _still_to_stop(conn_id, requested["request"]["request_id"])
        if not moving or not active_runs() or time.monotonic() >= deadline:
            break
        sleep(poll_s)
    decisions.record(
        "stop",
        "stop here" if moving else "nothing in flight",
        f"no executing task stopped within {wait_s:.0f} s (no run active, worker dead or task killed): this "
        "runbook cancels what the state files record in flight and takes the throttles off"
        if moving
        else "no state file records a chunk moving or a throttle set; a run waiting at its gate stops "
        "when its execution starts",
        observed={"recorded_in_flight": moving},
        logger=log,
    )
    return {"acknowledged": {}, "recorded_in_flight": moving}


def _acknowledged(requested: dict[str, Any]) -> dict[str, Any]:
    """What the executing tasks wrote back on the stop request (one request per reassigning DAG)."""
    from kafka_runbooks.failed_broker.stop import read_request

    acknowledged: dict[str, Any] = {}
    for each in requested.get("paths", [requested["path"]]):
        request = read_request(storage.locate(each))
        acknowledged.update(request.acknowledged if request and request.acknowledged else {})
    return acknowledged


def _still_to_stop(conn_id: str, request_id: str) -> list[str]:
    """The runs' state files with something on the cluster: not stopped yet, or being stopped by
    the task for this request (its acknowledgement comes after its read-back)."""
    from kafka_runbooks.failed_broker.stop import needs_stopping

    return [
        n
        for n, (_, s) in _states(conn_id).items()
        if needs_stopping(s) and (not s.stop_request or s.stop_request.get("request_id") == request_id)
    ]


def stop_settle(admin: ClusterAdmin, states: list, asked_s: float, logger) -> dict[str, Any]:
    """The stop's read-back settle: ``asked_s``, never shorter than the cluster's
    ``broker.session.timeout.ms`` (recorded: asked, held, why), its last read asking the leaders and
    ISR members of the stopped runs' partitions themselves (``verify_stopped``'s keyword arguments)."""
    from kafka_runbooks_airflow.verify_settings import partitions_ask, settle_record

    timeouts = admin.cluster_timeouts()
    settle_record("stop", asked_s, timeouts, logger)
    keys = {k for state in states for c in state.chunks for k in c.targets}
    topics = sorted({k.rsplit(":", 1)[0] for k in keys})

    def partitions(_):
        """The stopped runs' partitions as the cluster has them now."""
        found = admin.describe_topic_partitions(topics) if topics else []
        return [p for p in found if f"{p.topic}:{p.partition}" in keys]

    ask = partitions_ask(admin, partitions)
    return {"settle_s": asked_s, "timeouts": timeouts, "ask": lambda: ask(None)}


def stop_and_verify(requested: dict[str, Any], settle_s: float = 5.0) -> dict[str, Any]:
    """Stop every state of the connection that has something on the cluster; read it all back for a
    settle period that can see a death (``stop_settle``)."""
    from kafka_runbooks.failed_broker.execute import claim, fenced_checkpoint, key
    from kafka_runbooks.failed_broker.stop import StopRequest, stop, to_stop, verify_stopped
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    request = StopRequest(**requested["request"])
    admin = KafkaAdminHook(kafka_config_id=request.kafka_config_id).admin
    try:
        states = _states(request.kafka_config_id, admin.ping())
        inflight = {key(t, p): v for (t, p), v in admin.list_reassignments().items()}
        chosen = to_stop({n: s for n, (_, s) in states.items()}, inflight, request.request_id)
        done: dict[str, dict] = {}
        for name in list(chosen):
            path = states[name][0]
            # claimed first: a task still running for that run acts no more after this
            chosen[name] = state = claim(path, f"stop request {request.request_id}")
            done[name] = stop(
                admin, state, request, checkpoint=fenced_checkpoint(path, state.fence), logger=log
            )
        left = verify_stopped(
            admin,
            {
                n: (s, done[n]["throttle"] or (s.stop_request or {}).get("throttle_removed"))
                for n, s in chosen.items()
            },
            **stop_settle(admin, list(chosen.values()), settle_s, log),
        )
    finally:
        admin.close()
    total = {"cancelled": [k for d in done.values() for k in d["cancelled"]], "errors": {}}
    for d in done.values():
        total["errors"].update(d["errors"])
    _record_stopped(f"connection {request.kafka_config_id}", request, total, left, log)
    if left:
        raise RunbookFailed(f"not fully stopped (run this again to retry): {left}")
    return {"stopped": sorted(chosen), "cancelled": len(total["cancelled"])}


def stop_run_now(dag_id: str, run_id: str, conn_id: str, user: str, reason: str) -> dict[str, Any]:
    """The console's Stop: write the same stop request as the stop DAG, then stop the run here at once.

    It acts under the run's fence, so it need not wait for the executing task's next poke (under load
    that was minutes): the claim makes every later write of a poke that is running, or of a zombie
    attempt, fail before it sets a throttle or submits a move, since both are recorded before they
    are done. What such a task had recorded just before the claim may still reach the cluster after
    the first cancel: the read-back sees it (it is in the claimed state) and stops again. The next
    poke finds the state stopped and fails its run saying who stopped it; the run's cleanup task
    elects the preferred leaders of what moved.
    """
    requested = request_stop({"kafka_config_id": conn_id, "reason": reason}, f"console {run_id}", user, 1)
    from kafka_runbooks.failed_broker.stop import StopRequest, stop_headline

    request = StopRequest(**requested["request"])
    folder = run_dir(dag_id, run_id)
    out: dict[str, Any] = {"request": requested["request"], "states": {}}
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        for path in (folder / ADOPT_STATE, folder / EXEC_STATE):
            if path.exists():
                out["states"][path.name] = _stop_state_now(admin, path, request, run_id)
    finally:
        admin.close()
    out["headline"] = stop_headline(out["states"].values())
    return out


def _stop_state_now(admin: ClusterAdmin, path: StorePath, request, run_id: str) -> dict[str, Any]:
    """Claim one state of the run, stop it until the cluster reads clean, write its ending."""
    import time
    from dataclasses import asdict

    from kafka_runbooks.failed_broker import progress
    from kafka_runbooks.failed_broker.execute import Superseded, claim, fenced_checkpoint, load_state
    from kafka_runbooks.failed_broker.stop import ending, final_progress, stop_until_clean

    now = load_state(path)
    if now.finished:  # final: no claim, so the run's leader moves go on undisturbed
        return {**asdict(ending(now)), "finished": True, "complete": True, "line": ending(now).line()}
    state = claim(path, f"stop request {request.request_id}")
    try:
        done, left = stop_until_clean(admin, state, request, fenced_checkpoint(path, state.fence), log)
    except Superseded as exc:  # the executing task claimed it meanwhile: it stops its run itself
        return {"taken_over": str(exc)}
    progress.write(_progress_file(path), final_progress(state, time.time()))
    _record_stopped(f"run {run_id}", request, done, left, log)
    result = ending(state)
    return {**asdict(result), "complete": result.complete, "line": result.line(), "left": left}


@gate_action("reassign")
def reassign_action(context) -> dict[str, Any]:
    """The reassigning runbooks (heal, decommission, log-dir failure, rebalance): the chunks the
    reassignment sensor will submit (the run's execution state file), and the leader moves after."""
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    reviewed = run_xcom(context, "review_plan") or {}
    checked = run_xcom(context, "validate") or {}
    path = run_dir(dag_id, run_id) / EXEC_STATE
    state = json.loads(path.read_text()) if path.exists() else {}
    action = {
        "runbook": dag_id,
        "run_id": run_id,
        "kafka_config_id": context["params"].get("kafka_config_id"),
        "failed_brokers": state.get("failed_brokers"),
        "throttle_bytes_per_sec": state.get("throttle_bytes_per_sec"),
        "chunks": [c.get("targets") for c in state.get("chunks", [])],
        "elect_preferred_leaders": checked.get("elect_preferred_leaders"),  # done after healing
        "dry_run": bool(checked.get("dry_run", reviewed.get("dry_run"))),
        "require_approval": bool(checked.get("require_approval", reviewed.get("require_approval", True))),
    }
    leader_moves = planned_leader_moves(checked)
    if leader_moves:  # the rebalance's reorders, applied after the chunks: approved with them
        action["leader_moves"] = leader_moves
    return action


def planned_leader_moves(checked: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's leader-only moves (a rebalance's replica reorders, in its summary.json; none for
    a heal or a drain): what the verify step applies, so the approval must name them too."""
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE

    if not checked.get("plan_dir"):
        return []
    summary = storage.locate(checked["plan_dir"]) / SUMMARY_FILE
    return (json.loads(summary.read_text()).get("leader_moves") or []) if summary.exists() else []
