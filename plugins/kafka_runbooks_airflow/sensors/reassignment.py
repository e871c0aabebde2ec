"""Sensor that executes a reassignment plan chunk by chunk, in reschedule mode; the next chunk
starts as soon as one of its receivers has room (``execute.next_to_start``), not when the chunk
before it is done.

Between pokes it holds no worker slot (copying a broker's worth of replicas under a
throttle takes hours). Each poke advances the resumable state machine of
:mod:`kafka_runbooks.failed_broker.execute` for at most ``max_poke_s``; its state file lives
in the run's folder, so a cleared or retried task resumes where it stopped and nothing
moves twice. ``on_kill`` takes the replication throttle off when the task is killed
mid-poke; the DAG's all_done cleanup task does the same after any failure.

Each poke claims the state file first (``execute.claim``): a poke of a newer attempt, the
cleanup task or a stop that claims after it makes this poke's next write fail before it
acts (``execute.Superseded``). That matters because Airflow 3.3.2 lets a task it marked
failed run on until the next heartbeat, and its SIGTERM only calls ``on_kill``: seen on
the real stack, a killed poke submitted the next chunk 3 s after its SIGTERM, while the
cleared task's new attempt was already running, and the throttle it set outlived both.
Before the newer attempt claims (it is only queued), the executor asks Airflow right before each
submission whether this try is still ``running`` (``task_state.still_current_from``): a cleared
try (``restarting``) or one marked ``failed`` submits nothing, and an Airflow that cannot answer
fails the poke with nothing submitted.

When every chunk is done, the same approved task makes the run's approved leader moves (a
rebalance's leader-only reorders, then the preferred-leader election of what moved:
``kafka_runbooks_airflow.leader_moves``), each behind its own approval check, none twice; only
then does it succeed.

Before every step it reads the stop request of its Kafka connection
(:mod:`kafka_runbooks.failed_broker.stop`, written by the ``kafka_reassignment_stop`` DAG): one
asked after its run started makes it cancel what its run has in flight, take the
throttle off, read that back and fail the run with "stopped by <user>: <reason>".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator


class KafkaReassignmentSensor(BaseSensorOperator):
    """Advance the chunks recorded in the run's state file; succeed when all are done.

    :param kafka_config_id: Kafka connection (templated).
    :param state_file: name of the state file in the run's folder (``exec-state.json``
        for the plan, ``adopt-state.json`` for reassignments adopted from an earlier run).
    :param approval_gate_task_id: the gate whose approval of this run's current chunks must
        exist before anything moves (``kafka_runbooks_airflow.gate``); None: no check (the
        adopted reassignments of an earlier run were approved there).
    """

    template_fields: Sequence[str] = ("kafka_config_id",)

    def __init__(
        self,
        *,
        kafka_config_id: str = "kafka_default",
        state_file: str = "exec-state.json",
        max_poke_s: float = 30.0,
        step_interval_s: float = 3.0,
        approval_gate_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.approval_gate_task_id = approval_gate_task_id
        self.kafka_config_id = kafka_config_id
        self.state_file = state_file
        self.max_poke_s = max_poke_s
        self.step_interval_s = step_interval_s
        self._path = None
        self._fence: int | None = None
        self._killed = False

    def _halted(self) -> str | None:
        return "this task was killed (on_kill ran)" if self._killed else None

    def poke(self, context) -> bool:
        """Advance the run's chunks for at most ``max_poke_s``; True once every chunk is done.

        Claims the state first, so an older attempt still running acts no more; a stop asked
        for is honoured before every step.
        """
        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks.failed_broker.execute import ReassignError, Superseded, claim, fenced_checkpoint
        from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

        path = self._checked_state_path(context)
        ti = context["ti"]
        state = claim(path, f"{context['run_id']} {self.task_id} try {ti.try_number}")
        self._fence = state.fence
        checkpoint = fenced_checkpoint(path, state.fence, self._halted)
        if state.finished and not self.approval_gate_task_id:  # adopted moves: no leader step of this run
            self.log.info("every chunk of %s is already done", path.name)
            return True
        admin = KafkaAdminHook(kafka_config_id=self.kafka_config_id).admin
        done = False  # superseded by a stop that found the work complete: the next poke finishes it
        try:
            done = self._advance(context, admin, state, checkpoint, path)
        except Superseded as exc:
            self._superseded(path, exc)
        except ReassignError as exc:
            raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        return done

    def _advance(self, context, admin, state, checkpoint, path) -> bool:
        """The chunks' steps (none once all are done), then, once every chunk is done, the approved
        leader moves in this same approved task (none twice); True when both are done."""
        from kafka_runbooks.failed_broker.execute import RECEIVER_SLOTS, ChunkExecutor
        from kafka_runbooks_airflow.task_state import still_current_from

        stop_asked = self._stop_request(context)
        progress_file = self._progress_file(path)
        done = state.finished
        if done:
            self.log.info("every chunk of %s is already done", path.name)
        else:
            executor = ChunkExecutor(  # chunks overlap: the next starts when a receiver has room
                admin,
                logger=self.log,
                checkpoint=checkpoint,
                progress_file=progress_file,
                receiver_slots=RECEIVER_SLOTS,
                still_current=still_current_from(context, self.dag_id, self.task_id),
            )
            done = self._steps(executor, state, stop_asked, admin, checkpoint, path, progress_file, context)
        if state.finished:
            done = self._after_chunks(context, admin, state, path, checkpoint, stop_asked() is not None)
        return done

    def _after_chunks(self, context, admin, state, path, checkpoint, stop_asked: bool) -> bool:
        """Every chunk is done: this run's approved leader-only moves and preferred-leader election
        (``leader_moves.after_chunks``: each behind its own approval check, none done twice), then True.
        The adopted moves of an earlier run (no gate of this run) end here."""
        if self.approval_gate_task_id:
            from kafka_runbooks_airflow.leader_moves import after_chunks

            after_chunks(context, admin, state, path, checkpoint, stop_asked, self.log)
        return True

    def _checked_state_path(self, context):
        """The run's state file, checked every poke before anything moves: it exists, the chunks
        are still the approved ones, and this run still holds the cluster's lease."""
        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks_airflow.run_state import run_dir

        path = run_dir(self.dag_id, context["run_id"]) / self.state_file
        self._path = path
        if not path.exists():
            raise AirflowFailException(f"nothing to execute for this run ({path} is missing)")
        if self.approval_gate_task_id:  # every poke: the chunks must still be the approved ones
            from kafka_runbooks_airflow.gate import require_approval

            require_approval(context, "reassign", self.approval_gate_task_id, self.log)
        from kafka_runbooks_airflow.lease import renew_lease

        renew_lease(context, self.kafka_config_id)  # every poke: this run still holds the cluster
        return path

    def _progress_file(self, path):
        """Where the progress goes: ``progress.json`` for the plan's state (what the Kafka page of
        the UI reads), a name of its own beside any other state file."""
        progress_file = path.with_name(path.name.replace("state.json", "progress.json"))
        if self.state_file == "exec-state.json":
            progress_file = path.with_name("progress.json")  # what the Kafka page of the UI reads
        return progress_file

    def _steps(self, executor, state, stop_asked, admin, checkpoint, path, progress_file, context) -> bool:
        """Step the executor until done or the poke's time is up (reschedule mode: no worker slot
        held between pokes), reading the stop request before every step."""
        started = time.monotonic()
        self._stop_if_asked(stop_asked(), admin, state, checkpoint, path, progress_file, context)
        done = executor.step(state)
        while not done and time.monotonic() - started + self.step_interval_s < self.max_poke_s:
            time.sleep(self.step_interval_s)
            self._stop_if_asked(stop_asked(), admin, state, checkpoint, path, progress_file, context)
            done = executor.step(state)
        return done

    def _superseded(self, path, exc) -> None:
        """Another process claimed the run's state mid-poke: act no more. When that was a stop (the
        console's Stop acts at once, under the fence), the run fails saying who stopped it and how
        it ended, not with a bare 'superseded'."""
        import logging

        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks import decisions, retries
        from kafka_runbooks.failed_broker.execute import load_state
        from kafka_runbooks.failed_broker.stop import ending

        decisions.record("execute", "stop acting", str(exc), logger=self.log, level=logging.ERROR)
        # a stop writes its request into the state right after its claim: wait up to 10 s for it
        state, _ = retries.poll_until(
            lambda: load_state(path),
            lambda s: bool(s.stop_request) or not (s.claimed_by or "").startswith("stop request"),
            timeout_s=10,
            interval_s=0.5,
        )
        if state.stop_request and ending(state).complete:
            self.log.info("%s; the next poke finishes the run", ending(state).line())
            return
        if state.stop_request:
            raise AirflowFailException(ending(state).line()) from exc
        raise AirflowFailException(str(exc)) from exc

    def _stop_request(self, context):
        """A reader of this connection's stop request that answers only one that applies to this run."""
        from kafka_runbooks.failed_broker.stop import read_request
        from kafka_runbooks_airflow.run_state import stop_request_file

        file = stop_request_file(self.dag_id, self.kafka_config_id)
        started = getattr(context.get("dag_run"), "start_date", None)
        started_ms = int(started.timestamp() * 1000) if started else None

        def asked():
            """The stop request for this cluster if it applies to this run (asked after the run started),
            else None."""
            request = read_request(file)
            return request if request and request.applies_to(self.kafka_config_id, started_ms) else None

        return asked

    def _stop_if_asked(self, request, admin, state, checkpoint, path, progress_file, context) -> None:
        """Stop cleanly (cancel ours in flight, throttle off, read back), then fail the run saying who stopped it."""
        if request is None:
            return
        from kafka_runbooks import decisions
        from kafka_runbooks.failed_broker.execute import DONE

        if state.chunks and all(c.status == DONE for c in state.chunks):  # the step finishes the run
            decisions.record(
                "execute",
                "nothing to stop",
                f"{request.text}, after the last chunk was done",
                logger=self.log,
            )
            return
        from airflow.sdk.exceptions import AirflowFailException

        from kafka_runbooks_airflow.failed_broker import stop_run_state

        left = stop_run_state(
            admin, state, path, request, progress_file, context["run_id"], self.log, checkpoint
        )
        from kafka_runbooks.failed_broker.stop import ending

        if left:
            raise AirflowFailException(f"{ending(state).line()}; but the stop is not complete: {left}")
        raise AirflowFailException(ending(state).line())

    def on_kill(self) -> None:
        """Killed mid-poke: act no more, and take the throttle off unless someone claimed the
        run's state since this poke did (then the throttle is theirs). The copy itself goes on;
        a re-run adopts it."""
        import json

        from kafka_runbooks_airflow.failed_broker import clean_leftover_throttles
        from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

        self._killed = True  # the poke's next write fails: SIGTERM does not stop it (Airflow 3.3.2)
        if self._path is None or not self._path.exists():
            return
        if json.loads(self._path.read_text()).get("fence", 0) != self._fence:
            self.log.info(
                "killed, and the run's state was claimed since: its throttle is not ours to take off"
            )
            return
        admin = KafkaAdminHook(kafka_config_id=self.kafka_config_id).admin
        try:
            clean_leftover_throttles(admin, self.dag_id, only=[self._path])
        except Exception as exc:  # best effort: the cleanup task and the next run retry
            self.log.warning("could not remove the throttle on kill: %s", exc)
        finally:
            admin.close()
