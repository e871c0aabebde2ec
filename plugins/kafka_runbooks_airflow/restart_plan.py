"""Planning task of ``kafka_broker_restart``: validate, order, persist. Touches nothing."""

from __future__ import annotations

import json
import logging
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.restart.roller import Roller, RollInputError, RollOptions, RollState, parse_node_ids
from kafka_runbooks.restart.safety import gate_markdown
from kafka_runbooks.units import parse_duration
from kafka_runbooks_airflow.gate import gate_action, run_xcom
from kafka_runbooks_airflow.run_state import read_roll_state, roll_state_file, write_roll_state

log = logging.getLogger(__name__)


def plan_roll(params: dict, dag_id: str, run_id: str) -> dict:
    """Order the nodes and write the roll plan, or resume the one a cleared run already wrote; a bad
    reason, option or node list fails the task with a decision record, nothing restarted."""
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook, RestartBackendHook

    earlier = read_roll_state(dag_id, run_id)
    if earlier is not None:  # a cleared run: keep the plan and the progress made
        state = RollState.from_json(earlier)
        log.info("resuming the roll planned earlier for this run: %s", roll_state_file(dag_id, run_id))
        return _summary(state, resumed=True)
    reason = (params.get("reason") or "").strip()
    if len(reason) < 3:
        _refuse(
            "give a reason for the restart, at least 3 characters (it is logged in every decision record)"
        )
    options = RollOptions(
        operation_timeout_s=parse_duration(params["operation_timeout_s"], "operation_timeout_s", minimum_s=5),
        max_attempts=int(params["max_attempts"]),
        allow_force_restart=bool(params["allow_force_restart"]),
        dry_run=bool(params["dry_run"]),
    )
    admin = KafkaAdminHook(kafka_config_id=params["kafka_config_id"]).admin
    try:
        probe = BrokerProbeHook(params["probe_conn_id"]).get_probe() if params.get("probe_conn_id") else None
        backend = RestartBackendHook(params["restart_conn_id"]).get_backend()
        state = Roller(admin, backend, probe, logger=log).plan(
            parse_node_ids(params["node_ids"]), reason, options
        )
    except (RollInputError, ValueError) as exc:
        _refuse(str(exc))
    finally:
        admin.close()
    write_roll_state(dag_id, run_id, state.to_json())
    summary = _summary(state, resumed=False)
    summary["require_approval"] = bool(params["require_approval"])
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
    order, each node's role, every option (timeouts, attempts, force, quorum lag), the
    evidence rows the approver was shown (``gate_rows``), and the connections the sensor
    acts through (cluster, probe, restart back end). Not the progress (phases, attempts,
    evidence read during the roll): it changes at every step of an approved roll.
    """
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    params = context["params"]
    plan = run_xcom(context, "plan_restart") or {}
    state = json.loads(read_roll_state(dag_id, run_id) or "{}")
    return {
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
