"""The settings every thrown-away Airflow of the tests and the fault campaign runs the runbooks with.

They shorten Airflow's own waits and switch the sweeps' schedules off, never a runbook's rule
(docs/testing.md says why each is there). One definition for the end-to-end tests' Airflow and the
campaign's (``kafka_runbooks_dev.chaos``): a campaign that ran the runbooks under other settings
would prove something else.
"""

from __future__ import annotations

import sys
from pathlib import Path

TEST_ALERTS_TOKEN = "e2e-alerts-token"  # noqa: S105 - the test Airflow's, on loopback only


def runbook_test_settings(data_dir: Path) -> dict[str, str]:
    """The environment of a test Airflow whose runbook data lives in ``data_dir``."""
    return {
        "KAFKA_RUNBOOKS_DATA_DIR": str(data_dir),
        # spark-submit runs the PySpark driver with this interpreter (the venv's)
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # reschedule sensors poke every 15 s in tests (30 s by default); shorter
        # intervals meet Airflow 3.3.2's late-report race (see sensors/rolling_restart.py)
        "KAFKA_RUNBOOKS_POKE_INTERVAL_S": "15",
        # a verify reads the cluster back until its end state has held this long (15 s and
        # 10 s for the election by default): shorter here, never shorter than the cluster's
        # broker.session.timeout.ms (the evidence room raises it to that)
        "KAFKA_RUNBOOKS_VERIFY_SETTLE_S": "5",
        "KAFKA_RUNBOOKS_ELECTION_SETTLE_S": "3",
        # the metadata-error sweep runs only when a test triggers it (its runs build on each other)
        "KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE": "none",
        "KAFKA_RUNBOOKS_FAILED_BROKER_SWEEP_SCHEDULE": "none",
        # the tests trigger health runs; a scheduled one would run first and they would queue
        "KAFKA_RUNBOOKS_HEALTH_SCHEDULE": "none",
        # the Connect sweep too (every minute once a test's trigger unpaused it): a scheduled
        # sweep made the test's own runs queue behind it (max_active_runs=1)
        "KAFKA_RUNBOOKS_CONNECT_AUTORESTART_SCHEDULE": "none",
        # a second user allowed to edit runs, and gates that only admin may answer
        # (test_gate_approvers.py); the other tests answer as admin
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,kafka-observer:user",
        "KAFKA_RUNBOOKS_APPROVERS": "admin",
        # the alert receiver's shared secret (tests/e2e/test_alert_intake.py; a deployment sets its own)
        "KAFKA_RUNBOOKS_ALERTS_TOKEN": TEST_ALERTS_TOKEN,
        # no test changes a DAG file: parse each once (every 5 s took 0.66 of a CPU from the tests)
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        # the scheduler's idle loop sleeps 1 s by default: ~1 s between one task's end and the
        # next one's start, ~220 task hand-offs in the lane's runs; at 0.2 s they take ~0.4 s
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
        # an unanswered gate (AWAITING_INPUT past its timeout) is failed by a scheduler sweep
        # every trigger_timeout_check_interval (15 s by default): up to 15 s more per timeout
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
        # a task's supervisor can notice its task process's exit only when its wait for the
        # process's sockets times out, after up to min_heartbeat_interval (5 s by default): a
        # parked gate was reported up to 5 s late, and wait_for_approval waits for that report
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    }
