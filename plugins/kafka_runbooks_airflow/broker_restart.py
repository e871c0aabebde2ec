"""Task glue of ``kafka_broker_restart``: the plan task (validate, order, persist; touches nothing)
and what its approval gate approves (the ``restart`` action).

Named after its DAG like the other runbooks' glue; the roll itself is ``kafka_runbooks.restart``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions
from kafka_runbooks.restart.roller import Roller, RollInputError, RollState
from kafka_runbooks.restart.safety import gate_markdown
from kafka_runbooks_airflow.gate import gate_action, run_xcom
from kafka_runbooks_airflow.run_state import read_roll_state, roll_state_file, write_roll_state

if TYPE_CHECKING:
    from kafka_runbooks.restart.request import RestartRequest

log = logging.getLogger(__name__)


def restart_request(params: Mapping[str, Any]) -> RestartRequest:
    """The run's params as the library's request, built once per task and before any cluster
    call: a bad one fails the task with a decision record, nothing restarted."""
    from kafka_runbooks.restart.request import build_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    return refuse_bad_input(build_request, params, log.name)


def plan_roll(
    request: RestartRequest,
    kafka_config_id: str,
    dag_id: str,
    run_id: str,
    *,
    probe_conn_id: str | None,
    restart_conn_id: str,
) -> dict:
    """Order the nodes and write the roll plan, or resume the one a cleared run already wrote.

    Takes the request built once by ``restart_request`` (the input is judged there, before
    any cluster call) and the connections the roll acts through; reads no params itself.
    """
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook, RestartBackendHook

    earlier = read_roll_state(dag_id, run_id)
    if earlier is not None:  # a cleared run: keep the plan and the progress made
        state = RollState.from_json(earlier)
        log.info("resuming the roll planned earlier for this run: %s", roll_state_file(dag_id, run_id))
        return _summary(state, resumed=True)
    from kafka_runbooks_airflow.acl_check import require_acls

    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        require_acls(admin, "kafka_broker_restart", kafka_config_id)  # its reads, before the gate
        probe = BrokerProbeHook(probe_conn_id).get_probe() if probe_conn_id else None
        backend = RestartBackendHook(restart_conn_id).get_backend()
        state = Roller(admin, backend, probe, logger=log).plan(
            request.node_ids, request.reason, request.roll_options()
        )
    except (RollInputError, ValueError) as exc:
        _refuse(str(exc))
    finally:
        admin.close()
    write_roll_state(dag_id, run_id, state.to_json())
    summary = _summary(state, resumed=False)
    summary["require_approval"] = request.require_approval
    return summary


def _refuse(why: str) -> None:
    """Bad input: a DECISION record that says what was wrong, then a failure without retry."""
    from airflow.sdk.exceptions import AirflowFailException

    decisions.record(
        "validate", "refuse the run: nothing was restarted", why, logger=log, level=logging.ERROR
    )
    raise AirflowFailException(f"nothing was restarted: {why}")


def _summary(state: RollState, resumed: bool) -> dict:
    """The plan's XCom: the digest-friendly fields, and the availability evidence as a
    Markdown table for the approval gate's body (the UI renders tables, not code blocks)."""
    return {
        "order": state.order,
        "stages": state.stages_text,
        "gate_markdown": gate_markdown(state.gate_rows),
        "phases": {str(n): p.phase for n, p in state.nodes.items()},
        "dry_run": state.options.dry_run,
        "require_approval": True,
        "resumed": resumed,
    }


@gate_action("restart")
def restart_action(context) -> dict[str, Any]:
    """kafka_broker_restart: the roll the sensor will drive (from the roll-state file it reads).

    Covers everything the roll reads that decides what it does or how it checks: the
    order, each node's role and lane (which nodes are in flight together), every option (timeouts, attempts, force, quorum lag), the
    evidence rows the approver was shown (``gate_rows``), and the connections the sensor
    acts through (cluster, probe, restart back end). Not the progress (phases, attempts,
    evidence read during the roll): it changes at every step of an approved roll.
    """
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    params = context["params"]
    plan = run_xcom(context, "plan_restart") or {}
    state = json.loads(read_roll_state(dag_id, run_id) or "{}")
    return _with_lanes(state) | {
        "runbook": dag_id,
        "run_id": run_id,
        "kafka_config_id": params.get("kafka_config_id"),
        "probe_conn_id": params.get("probe_conn_id") or None,
        "restart_conn_id": params.get("restart_conn_id"),
        "reason": state.get("reason"),
        "order": state.get("order"),
        "roles": {n: p.get("role") for n, p in (state.get("nodes") or {}).items()},
        "options": state.get("options"),
        "evidence": state.get("gate_rows") or [],
        "dry_run": bool((state.get("options") or {}).get("dry_run", plan.get("dry_run"))),
        "require_approval": bool(params["require_approval"]),
    }


def _with_lanes(state: dict) -> dict[str, Any]:
    """Which nodes restart side by side (``restart.lanes``), for the digest. A state file from
    before lanes has none (its nodes roll alone) and adds nothing: a roll approved before the
    upgrade still matches its approval and resumes one node at a time."""
    lanes = {n: p["lane"] for n, p in (state.get("nodes") or {}).items() if "lane" in p}
    return {"lanes": lanes} if lanes else {}
