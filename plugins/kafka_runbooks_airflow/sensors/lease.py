"""The sensor that takes a cluster's lease before a run plans anything, and the lease's two tasks.

What the lease is and who may hold it is :mod:`kafka_runbooks_airflow.lease` (over the
Airflow-free :mod:`kafka_runbooks.lease`); here is only the Airflow side: a reschedule sensor
that waits for it (no worker slot held) or fails naming the holder, and the teardown that
gives it back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from kafka_runbooks import decisions
from kafka_runbooks.units import parse_duration
from kafka_runbooks_airflow.lease import ON_HELD, cluster_lease, lease_needed, log, release_lease


class ClusterLeaseSensor(BaseSensorOperator):
    """Take the cluster's lease before the run plans anything; wait for it, or fail, by param.

    :param kafka_config_id: the cluster (its connection id), templated.
    :param on_held: ``wait`` (reschedule until free) or ``fail`` (name the holder), templated.
    :param hold_for_s: how long the lease must hold without renewal after this task (the
        approval gate's timeout: nothing renews while a gate waits), templated.
    """

    template_fields: Sequence[str] = ("kafka_config_id", "on_held", "hold_for_s")

    def __init__(
        self, *, kafka_config_id: str, on_held: str = "wait", hold_for_s: Any = 0, **kwargs: Any
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.kafka_config_id = kafka_config_id
        self.on_held = on_held
        self.hold_for_s = hold_for_s

    def poke(self, context) -> bool:
        """Take the cluster's lease (True), or keep waiting / fail naming the holder, by ``on_held``; a run
        that only reads needs no lease."""
        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks.lease import LeaseHeld

        params = dict(context["params"])
        if not lease_needed(self.dag_id, params):
            decisions.record(
                "lease",
                "no lease needed",
                "this run only reads the cluster (dry run or a read-only mode); it never waits for one",
                subject=f"cluster {self.kafka_config_id}",
                logger=log,
            )
            return True
        if self.on_held not in ON_HELD:
            raise AirflowFailException(f"on_lease_held must be one of {ON_HELD}, not {self.on_held!r}")
        lease = cluster_lease(context, self.kafka_config_id)
        hold_for_s = parse_duration(self.hold_for_s, "approval_timeout_s") if self.hold_for_s else 0.0
        outcome = lease.acquire(hold_for_s=hold_for_s + lease.ttl_s)
        if outcome.acquired:
            return True
        held = LeaseHeld(outcome.record)
        if self.on_held == "fail":
            decisions.record(
                "lease",
                "refuse the run: nothing was done",
                f"{held}; on_lease_held=fail",
                subject=f"cluster {self.kafka_config_id}",
                observed={"holder": outcome.record.describe()},
                logger=log,
                level=logging.ERROR,
            )
            raise AirflowFailException(str(held))
        decisions.record(
            "lease",
            "wait for the lease",
            f"{held}; on_lease_held=wait: asked again every {self.poke_interval:.0f}s (no worker slot held)",
            subject=f"cluster {self.kafka_config_id}",
            observed={"holder": outcome.record.describe()},
            logger=log,
        )
        return False


def lease_tasks(poke_interval_s: float, wait_timeout_s: float = 72 * 3600):
    """``acquire_lease`` (first task of the run) and ``release_lease`` (its teardown).

    The lease is taken before the run reads the cluster for its plan, so the plan is made on
    a cluster no other runbook is changing; it is held through the approval gate (for as
    long as the gate may wait) and given back by the teardown, which runs whatever happened
    to the run (approved, rejected, failed, timed out). Clearing any task of the run clears
    both, so a cleared run takes the lease again (its own lease: it gets it back at once).
    """
    from airflow.sdk import get_current_context, task

    acquire = ClusterLeaseSensor(
        task_id="acquire_lease",
        kafka_config_id="{{ params.kafka_config_id }}",
        on_held="{{ params.on_lease_held }}",
        hold_for_s="{{ params.approval_timeout_s }}",
        poke_interval=poke_interval_s,
        timeout=wait_timeout_s,
    )

    @task(task_id="release_lease")
    def release() -> dict:
        """Give the cluster's lease back (teardown: runs whatever happened to the run)."""
        context = get_current_context()
        return release_lease(context, context["params"]["kafka_config_id"])

    return acquire, release()
