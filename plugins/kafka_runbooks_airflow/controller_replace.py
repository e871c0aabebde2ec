"""Airflow side of ``kafka_controller_replace``: params in, the library's steps out.

The plan task reads DescribeQuorum and returns the plan document the gate shows (voters with
lag and caught-up age, the observer, the steps, the majority before and after each); the
replace task refuses unless the gate approved exactly that document's steps, then runs them
(:class:`kafka_runbooks.controller_replace.runbook.ControllerReplacement`). Kafka's jars for
``kafka-metadata-quorum`` are found through the Variable ``kafka_runbooks_kafka_libs`` or the
environment variable ``KAFKA_RUNBOOKS_KAFKA_LIBS`` (a Kafka distribution's ``libs`` folder).

Each task reads the params once, into :class:`ReplaceRequest` (:func:`replace_request`), and
hands it on with the cluster's ``kafka_config_id``; nothing below reads the params again, so
the replace task waits and holds the lease for exactly what the plan was made with.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.controller_replace.plan import ReplaceRequest
from kafka_runbooks.controller_replace.quorum_tool import (
    LIBS_ENV,
    LIBS_VARIABLE,
    ControllerEndpoint,
    QuorumTool,
    require_tool,
)
from kafka_runbooks.errors import BadInput
from kafka_runbooks.units import parse_duration, parse_id_list
from kafka_runbooks_airflow.gate import gate_action, run_xcom
from kafka_runbooks_airflow.inputs import refuse_bad_input

log = logging.getLogger("kafka_runbooks.controller_replace")


def build_request(params: dict[str, Any]) -> ReplaceRequest:
    """The DAG's params as a request; BadInput names what is wrong (nothing was done)."""
    endpoint = params.get("new_controller_endpoint") or None
    if endpoint is not None:
        ControllerEndpoint.parse(endpoint)
    new = params.get("new_controller_id")
    if (new is None) != (endpoint is None):
        raise BadInput(
            "give both new_controller_id and new_controller_endpoint, or neither (a plain removal)"
        )
    return ReplaceRequest(
        remove=tuple(parse_id_list(params.get("remove_voters"), "remove_voters")),
        new_controller_id=None if new is None else int(new),
        new_controller_endpoints=(endpoint,) if endpoint else (),
        catch_up_timeout_s=parse_duration(params.get("catch_up_timeout_s", "5m"), "catch_up_timeout_s"),
        settle_s=parse_duration(params.get("settle_period_s", "10s"), "settle_period_s"),
    )


def replace_request(params: dict[str, Any]) -> ReplaceRequest:
    """The run's params as its request, read once at the start of a task; bad input is a DECISION
    record and a failed task (no retry), nothing done."""
    return refuse_bad_input(build_request, params, log.name)


def kafka_libs() -> str:
    """Where Kafka's jars are: the Variable, else the environment; BadInput when neither says."""
    from airflow.sdk import Variable

    try:
        value = Variable.get(LIBS_VARIABLE, default=None)
    except Exception:  # no Variable store reachable (a unit test): the environment decides
        value = None
    value = value or os.environ.get(LIBS_ENV)
    if not value:
        raise BadInput(
            f"set the Variable {LIBS_VARIABLE} or {LIBS_ENV} to a Kafka distribution's libs folder"
        )
    return value


def _runbook(request: ReplaceRequest, kafka_config_id: str):
    from kafka_runbooks.controller_replace.runbook import ControllerReplacement
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    hook = KafkaAdminHook(kafka_config_id=kafka_config_id)
    config = hook.client_config()
    tool = QuorumTool(kafka_libs(), hook.admin.bootstrap_servers, config)
    return hook.admin, ControllerReplacement(hook.admin, tool, request, logger=log)


def plan(request: ReplaceRequest, kafka_config_id: str) -> dict[str, Any]:
    """Read the quorum and plan; a step that would break the majority refuses here, before the gate."""
    from kafka_runbooks.controller_replace.runbook import ControllerReplacement
    from kafka_runbooks_airflow.acl_check import require_acls
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    try:
        require_tool(kafka_libs())  # everything the approved steps need, checked before the gate
    except BadInput as exc:
        decisions.record("plan", "refuse", str(exc), logger=log, level=logging.ERROR)
        raise
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        require_acls(
            admin, "kafka_controller_replace", kafka_config_id
        )  # AddRaftVoter's ALTER, before the gate
        document = ControllerReplacement(admin, None, request, logger=log).plan()  # type: ignore[arg-type]
    finally:
        admin.close()
    document["table_md"] = plan_markdown(document)
    return document


def replace(
    context, document: dict[str, Any], request: ReplaceRequest, kafka_config_id: str
) -> dict[str, Any]:
    """Refuse unless the gate approved these steps; then add, remove, verify."""
    from kafka_runbooks_airflow.gate import require_approval
    from kafka_runbooks_airflow.lease import renew_lease

    require_approval(context, "controller_replace", "approve_replacement")
    # this run still holds the cluster, for the whole replacement (two waits and the settle)
    hold = 3 * request.catch_up_timeout_s + request.settle_s
    renew_lease(context, kafka_config_id, hold_for_s=hold)
    admin, runbook = _runbook(request, kafka_config_id)
    try:
        return runbook.run(document)
    finally:
        admin.close()


def plan_markdown(document: dict[str, Any]) -> str:
    """The gate's body: voters, the observer, and each step with the majority before and after."""
    limit = document["quorum"].get("fetch_timeout_ms")
    rows = [
        f"Caught up: fetched and caught up within controller.quorum.fetch.timeout.ms={limit} ms "
        "(read from the cluster), by the quorum leader's clock in the same answer.",
        "",
        "| voter | state | lag (offsets) | last fetch (ms ago, leader's clock) | caught up (ms ago) | why |",
        "|---|---|---|---|---|---|",
    ]
    for v in document["quorum"].get("voters", []):
        lead = " (leader)" if v.get("leader") else ""
        rows.append(
            f"| {v['node_id']}{lead} | {v['state']} | {v['lag_offsets']} | {v.get('last_fetch_ms_ago')} "
            f"| {v['caught_up_ms_ago']} | {v.get('why', '')} |"
        )
    obs = document.get("observer")
    if obs:
        rows += [
            "",
            f"New controller {obs['node_id']} (observer: {obs['observer']}, directory id {obs['directory_id']}): "
            f"log end offset {obs['log_end_offset']} / high watermark {obs['high_watermark']}, "
            f"lag {obs['lag_offsets']} offsets, caught up {obs['caught_up_ms_ago']} ms ago: "
            f"{'caught up' if obs['caught_up'] else 'NOT caught up yet (the add waits for it)'}",
        ]
    rows += [
        "",
        "| step | voters before -> after | caught up before -> after | majority before -> after |",
        "|---|---|---|---|",
    ]
    for c in document["majority"]:
        rows.append(
            f"| {c['step']} | {c['voters_before']} -> {c['voters_after']} | "
            f"{c['caught_up_before']} -> {c['caught_up_after']} | {c['majority_before']} -> {c['majority_after']} |"
        )
    rows += ["", f"Final voters: {document['expected_voters']}"]
    return "\n".join(rows)


@gate_action("controller_replace")
def controller_replace_action(context) -> dict[str, Any]:
    """kafka_controller_replace: the voter changes replace will make (the plan document's steps,
    with the directory ids read from DescribeQuorum), the voter set it verifies, and its options."""
    params = context["params"]
    document = run_xcom(context, "plan_replacement") or {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "kafka_config_id": params.get("kafka_config_id"),
        "steps": document.get("steps"),
        "expected_voters": document.get("expected_voters"),
        "request": document.get("request"),
        "settle_period_s": params.get("settle_period_s"),
        "dry_run": False,
        "require_approval": True,
    }
