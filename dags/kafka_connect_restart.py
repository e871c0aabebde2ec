"""
### Kafka Connect restart (on request)

Restart one connector on one Connect cluster, as an operator asks:

- `scope: failed` (default): the connector if it FAILED and its FAILED tasks, one KIP-745 call;
- `scope: connector`: the connector instance only (its tasks keep running);
- `scope: tasks` with `task_ids`, e.g. `[1]`: those tasks only;
- `scope: all`: the connector and every task.

`check_request` validates the params without touching the network; `restart` then lists
the cluster once and fails with a clear message, before any restart, if the connector or a
task id does not exist. It logs the status before and after.

**Success only when it settled:** only status reads after the accepted restart count (the
202/204 answer comes before the worker applied it): each restarted item must first show its
restart (RESTARTING, or a state, worker or trace other than before it), then the connector
and every restarted task must read RUNNING for 5 s in a row within `settle_timeout_s`. A
restart that never shows (Connect keeps no restart count) is unknown, not success, except
for items RUNNING before: a running task restarted on its own may show nothing in between, so
it settles only on RUNNING in every read for 15 s after the accepted restart. Otherwise the run fails with what was seen (e.g. `task 0 FAILED again after the
restart`, `task 1 UNASSIGNED not RUNNING after 60s`); with `fail_if_not_settled: false` it
only warns. It does not touch the auto-restart sweep's counts, and never deletes, pauses
or reconfigures anything.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, get_current_context, task

from kafka_runbooks_airflow import dag_settings
from kafka_runbooks_airflow.inputs import duration_schema, id_list_schema

with DAG(
    dag_id="kafka_connect_restart",
    description="Restart a Kafka Connect connector, some of its tasks, or the connector with its failed tasks.",
    doc_md=__doc__,
    **dag_settings.manual_runbook(tags=["kafka", "connect", "manual", "remediation"]),
    params={
        "connect_conn_id": Param(
            "kafka_connect_default",
            type="string",
            minLength=1,
            description="Airflow HTTP connection of the Kafka Connect cluster (Admin > Connections).",
        ),
        "connector": Param(
            None,
            type=["null", "string"],
            minLength=1,
            description="Required. The connector's name exactly as Connect lists it; an unknown name stops the "
            "run before anything is restarted; left empty, the run refuses at once (a DECISION record says so).",
        ),
        "scope": Param(
            "failed",
            type="string",
            enum=["failed", "connector", "tasks", "all"],
            description="failed: the connector if it is FAILED and its FAILED tasks; connector: the connector "
            "only; tasks: the tasks in task_ids; all: the connector and every task.",
        ),
        "task_ids": Param(
            None,
            **id_list_schema(),
            description="Only with scope 'tasks': task ids separated by commas, e.g. '0' or '0,2'. "
            "Leave empty for the other scopes.",
        ),
        "settle_timeout_s": Param(
            "60s",
            **duration_schema(minimum=0, maximum=600),
            description="How long (e.g. '60s', '5m', or a number of seconds; at most 10m) to wait for the connector and the restarted tasks to read RUNNING (5 s in a "
            "row); if they do not, the run fails (see fail_if_not_settled). The status before and after is "
            "logged either way.",
        ),
        "fail_if_not_settled": Param(
            True,
            type="boolean",
            description="On: the run fails when the connector or a restarted task did not settle RUNNING "
            "within settle_timeout_s, naming what it saw. Off: it only warns and the run succeeds.",
        ),
    },
) as dag:

    @task
    def check_request() -> dict:
        """Read the params once into the request (no network): a bad request fails here."""
        from kafka_runbooks_airflow.connect import restart_request

        return restart_request(get_current_context()["params"]).as_dict()

    @task
    def restart(request: dict) -> dict:
        """List once, refuse unknown connector/task ids, restart, wait until it settled RUNNING."""
        from kafka_runbooks_airflow.connect import ConnectorRestartRequest, run_manual_restart

        return run_manual_restart(ConnectorRestartRequest.from_dict(request))

    restart(check_request())
