"""The runbooks' up-front ACL check in their plan and validate tasks (issue #38).

One call before a runbook's first read that leads to a write: ``kafka_runbooks.acls.require``
with the runbook's name (the DAG id; its row of ``kafka_runbooks.acl_table``), so a principal
that lacks an ACL fails the plan or validate task, before the gate, naming the operation and the
resource, with nothing written. A failure without retry: a retry cannot grant an ACL.
"""

from __future__ import annotations

import logging

from kafka_runbooks import acl_table, acls
from kafka_runbooks.errors import NotAuthorized

log = logging.getLogger("kafka_runbooks.acls")


def require_acls(admin, runbook: str, kafka_config_id: str) -> None:
    """Refuse the task (AirflowFailException, the check's decision record) unless the connection's
    principal has every ACL ``runbook`` needs; a DAG id the table does not know (a test DAG built
    from a runbook's tasks) is checked as the heal, which needs the most."""
    from airflow.sdk.exceptions import AirflowFailException

    known = runbook if runbook in acl_table.RUNBOOK_REQUESTS else "kafka_failed_broker_reassignment"
    try:
        acls.require(admin, known, subject=kafka_config_id)
    except NotAuthorized as exc:
        raise AirflowFailException(f"nothing was done: {exc}") from exc
