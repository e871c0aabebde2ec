"""Sensor that drives the rolling restart, one poke at a time, in reschedule mode.

Between pokes it holds no worker slot (a broker in log recovery can take many minutes).
Within one poke it keeps stepping for at most ``max_poke_s``, and past that, up to
``max_hold_s``, only while a node is between its restart request and done (a poke that ended
there would notice the node back only a ``poke_interval`` later: up to 30 s per node of a roll
whose restart straddled the end of a poke). Long pokes also keep reschedules rare: Airflow 3.3.2 can fail a
rescheduled task when the worker's late "success" report for one poke reaches the
scheduler after the next poke has started (the reschedule-path twin of
apache/airflow#67287). The roll's state lives in a JSON file keyed by the run, so a
cleared or retried task resumes where it stopped and never restarts a node twice.

Each poke claims the roll state first (:mod:`kafka_runbooks.fence`) and every write checks
the claim: a poke Airflow marked failed or cleared, still running for a few seconds beside
the new attempt (Airflow 3.3.2: SIGTERM only calls ``on_kill``, SIGKILL 5 s later), fails
at its next write. The roller writes before it asks for a restart, so a superseded poke
never restarts a node, and two processes never restart two nodes at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from kafka_runbooks import storage
from kafka_runbooks_airflow.run_state import read_roll_state, roll_state_file, roll_state_key


class KafkaRollingRestartSensor(BaseSensorOperator):
    """Advance the roll planned by the previous task; succeed when every node is done.

    :param kafka_config_id: Kafka connection (admin reads).
    :param probe_conn_id: broker-state probe connection; empty to run without a probe.
    :param restart_conn_id: restart back-end connection.
    :param approval_gate_task_id: the gate whose approval of this run's current roll plan
        must exist before any step (see ``kafka_runbooks_airflow.gate``); None: no check.
    """

    template_fields: Sequence[str] = ("kafka_config_id", "probe_conn_id", "restart_conn_id")

    def __init__(
        self,
        *,
        kafka_config_id: str = "kafka_default",
        probe_conn_id: str = "kafka_broker_probe_default",
        restart_conn_id: str = "kafka_restart_default",
        max_poke_s: float = 30.0,
        max_hold_s: float = 120.0,
        step_interval_s: float = 2.0,
        approval_gate_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.approval_gate_task_id = approval_gate_task_id
        self.max_poke_s = max_poke_s
        self.max_hold_s = max_hold_s
        self.step_interval_s = step_interval_s
        self.kafka_config_id = kafka_config_id
        self.probe_conn_id = probe_conn_id
        self.restart_conn_id = restart_conn_id
        self._killed = False

    def _halted(self) -> str | None:
        return "this task was killed (on_kill ran)" if self._killed else None

    def on_kill(self) -> None:
        """SIGTERM does not stop the poke (Airflow 3.3.2): its next write fails, before any restart."""
        self._killed = True

    def poke(self, context) -> bool:
        """Advance the roll for at most ``max_poke_s``; True once every node is done. Claims the
        roll's state first, so an older attempt still running restarts nothing more."""
        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks.fence import Superseded, claim, write_fenced
        from kafka_runbooks.restart.roller import Roller, RollFailed, RollState
        from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
        from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook, RestartBackendHook

        run_id = context["run_id"]
        self._check_before_acting(context, run_id)
        store, key = storage.store(), roll_state_key(self.dag_id, run_id)
        text, fence = claim(store, key, f"{run_id} {self.task_id} try {context['ti'].try_number}")
        state = RollState.from_json(text)
        if state.finished:
            self.log.info("every node of this roll is already done: %s", state.order)
            return True

        def save(s: RollState) -> None:
            """Write the roll state only under this attempt's fence (else Superseded)."""
            write_fenced(store, key, fence, s.to_json(), self._halted)

        admin = KafkaAdminHook(kafka_config_id=self.kafka_config_id).admin
        probe = BrokerProbeHook(self.probe_conn_id).get_probe() if self.probe_conn_id else None
        backend = RestartBackendHook(self.restart_conn_id).get_backend()
        roller = Roller(admin, backend, probe, logger=self.log, checkpoint=save)
        try:
            done = self._steps(roller, state, save)
        except Superseded as exc:
            import logging

            from kafka_runbooks import decisions

            decisions.record("roll", "stop acting", str(exc), logger=self.log, level=logging.ERROR)
            raise AirflowFailException(str(exc)) from exc
        except RollFailed as exc:
            save(state)
            raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        save(state)
        return done

    def _check_before_acting(self, context, run_id: str) -> None:
        """Every poke, before anything is restarted: a roll was planned for this run, the plan is
        still the approved one, and this run still holds the cluster's lease."""
        from airflow.sdk.exceptions import AirflowFailException

        if read_roll_state(self.dag_id, run_id) is None:
            where = roll_state_file(self.dag_id, run_id)
            raise AirflowFailException(f"no roll planned for this run ({where} is missing)")
        if self.approval_gate_task_id:  # every poke: the plan must still be the approved one
            from kafka_runbooks_airflow.gate import require_approval

            require_approval(context, "restart", self.approval_gate_task_id, self.log)
        from kafka_runbooks_airflow.lease import renew_lease

        renew_lease(context, self.kafka_config_id)  # every poke: this run still holds the cluster

    def _steps(self, roller, state, save) -> bool:
        """Step the roller until done or the poke's time is up (reschedule mode: no worker slot held
        between pokes), saving the state before each pause."""
        started = time.monotonic()
        done = roller.step(state)
        while not done and self._keep_poking(state, time.monotonic() - started + self.step_interval_s):
            save(state)
            time.sleep(self.step_interval_s)
            done = roller.step(state)
        return done

    def _keep_poking(self, state, elapsed_at_next_step: float) -> bool:
        """Within ``max_poke_s`` always; past it, up to ``max_hold_s``, only while a node in turn
        was asked to restart and is not done yet (it comes back in seconds: noticing it now
        instead of a reschedule later is what keeps the roll near its nodes' own times)."""
        if elapsed_at_next_step < self.max_poke_s:
            return True
        return elapsed_at_next_step < self.max_hold_s and mid_restart(state)


def mid_restart(state) -> bool:
    """A node the roll works on now (one, or one per lane: ``restart.lanes``) has been asked to
    restart (or is being) and is not back in sync yet."""
    from kafka_runbooks.restart.roller import RESTART, WAIT_BACK, WAIT_ISR

    return any(node.phase in (RESTART, WAIT_BACK, WAIT_ISR) for node in state.in_turn())
