"""End-to-end tests against a real Airflow (``airflow standalone``) started once per session.

Everything under tests/e2e is marked ``e2e``. Connections for the DAGs come from a
session fixture named ``airflow_connections`` (conn_id -> Airflow connection JSON dict)
if any conftest defines one, e.g. tests/conftest.py adding the Kafka and Spark
connections; without one Airflow starts with no connections. (It is looked up rather
than defined here with a ``{}`` default, because a fixture defined here would shadow one
defined in a higher-level conftest.)
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from kafka_runbooks_dev.localstack.airflow_gates import reject_waiting
from kafka_runbooks_dev.localstack.airflow_settings import runbook_test_settings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AIRFLOW_TEST_HOME = Path(os.environ.get("KR_AIRFLOW_TEST_HOME") or ROOT / ".stack" / "airflow-test")
DEFAULT_PORT = 28080


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep on the test item whether its body failed, for :func:`_reject_gates_after_a_failure`."""
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


@pytest.fixture(autouse=True)
def _reject_gates_after_a_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that failed, Reject every gate it left waiting in the package's Airflow.

    Seen in a clean-clone run: a browser test failed with its run at the gate, holding the
    cluster's lease, and the next two tests of its lane waited on that lease until they failed
    too (1427 s of the e2e stage). A test that passes leaves its gates alone."""
    airflow = request.getfixturevalue("airflow_local") if "airflow_local" in request.fixturenames else None
    yield
    if airflow is not None and request.node.stash.get(_CALL_FAILED, False):
        rejected = reject_waiting(airflow)
        if rejected:
            print(f"rejected the gates a failed test left waiting: {rejected}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def _connections(request: pytest.FixtureRequest) -> dict[str, dict]:
    """The session's connections; on the local stack, ``spark_default`` names the session's
    running Spark Connect server, as ``make demo``'s does: every analysis of the e2e runs starts
    in seconds instead of a spark-submit each (spark-submit through the runbooks' operator is
    tests/spark/test_jobs_on_s3a.py). Requesting them starts the stack and the server."""
    try:
        conns = dict(request.getfixturevalue("airflow_connections"))
    except pytest.FixtureLookupError:
        return {}
    if _spark_submit_per_analysis():
        return conns  # spark-submit per analysis, as the connection fixture gives it
    return _on_spark_connect(conns, request.getfixturevalue("spark_connect").port)


def _spark_submit_per_analysis() -> bool:
    return bool(os.environ.get("KR_E2E_SPARK_SUBMIT") or os.environ.get("KR_BOOTSTRAP_SERVERS"))


def _on_spark_connect(conns: dict[str, dict], port: int) -> dict[str, dict]:
    return {**conns, "spark_default": {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port}}


def _planned_connections() -> dict[str, dict] | None:
    """What :func:`_connections` will return, known before anything starts: the session's own
    stack takes its ports and folder from the environment, its Spark Connect server the port
    base + 2. None where only the started fixtures know (an external or a reused stack, or a
    conftest without the stack's connections)."""
    import tests.conftest as session

    if os.environ.get("KR_TEST_STACK_DIR") or _spark_submit_per_analysis():
        return None
    if not hasattr(session, "airflow_connections"):
        return None
    from kafka_runbooks_dev import spark_connect
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    base = int(os.environ.get("KR_TEST_PORT_BASE", "29000"))
    stack = LocalStack(home=session._stack_home(), topology=Topology(port_base=base))
    conns = stack.airflow_connections(spark_master="local[2]")
    return _on_spark_connect(conns, base + spark_connect.PORT_OFFSET)


@pytest.fixture(scope="package")
def airflow_local(request: pytest.FixtureRequest) -> Iterator[AirflowLocal]:
    """A fresh Airflow (new metadata DB) on 127.0.0.1, stopped after the last e2e test (the
    Celery tests, next in this lane, start an Airflow of their own: this one idling beside it
    took CPU from them)."""
    port = int(os.environ.get("KR_AIRFLOW_TEST_PORT", DEFAULT_PORT))
    stack_base = int(os.environ.get("KR_TEST_PORT_BASE", "29000"))
    if stack_base <= port <= stack_base + 402:  # Airflow takes port, +1, +2; the stack base..base+400
        pytest.fail(
            f"KR_AIRFLOW_TEST_PORT={port} falls among the test stack's ports ({stack_base}-{stack_base + 400}, "
            f"KR_TEST_PORT_BASE={stack_base}; Connect REST is {stack_base + 80}): pick a port outside them, "
            f"e.g. {stack_base + 450}"
        )
    airflow = AirflowLocal(
        AIRFLOW_TEST_HOME,
        port=port,
        dags_folders=[ROOT / "dags", HERE / "dags"],
        plugins_folder=ROOT / "plugins",
        # the settings every test Airflow runs the runbooks with (the fault campaign's too)
        extra_env=runbook_test_settings(AIRFLOW_TEST_HOME / "kafka_runbooks"),
    )
    AIRFLOW_TEST_HOME.parent.mkdir(parents=True, exist_ok=True)
    with open(AIRFLOW_TEST_HOME.with_name(AIRFLOW_TEST_HOME.name + ".lock"), "w") as lock:
        try:  # a concurrent session owns the Airflow in that folder: do not wipe or stop it
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(f"another test session is using {AIRFLOW_TEST_HOME}; wait for it to finish")
        airflow.stop()  # one left over from an interrupted session
        shutil.rmtree(AIRFLOW_TEST_HOME, ignore_errors=True)
        try:
            _start(airflow, request)
            yield airflow
        finally:
            # thrown away (the next session wipes its folder): killed, not stopped. Its graceful
            # stop waited for every component and the executor's workers to wind down, seconds
            # of this lane in which nothing else ran (the Celery module starts after it)
            airflow.stop(timeout=0)


def _start(airflow: AirflowLocal, request: pytest.FixtureRequest) -> None:
    """Start Airflow while the session's stack and Spark Connect server start (nothing of
    Airflow's start waits on them: its connections are known beforehand). Before, the three
    started one after the other: the first e2e test's set-up took ~100 s in the loaded suite.
    Connections that turn out other than planned restart Airflow with the real ones."""
    started = time.monotonic()
    planned = _planned_connections()
    airflow.connections = planned if planned is not None else _connections(request)
    airflow.spawn()
    if planned is not None:
        actual = _connections(request)
        print(f"\nstack and Spark Connect ready {time.monotonic() - started:.1f}s after Airflow's spawn")
        if actual != planned:
            print(f"connections differ from the planned ones: restarting Airflow\n{actual}\n{planned}")
            airflow.stop()
            airflow.connections = actual
            airflow.spawn()
    # ~25 s on an idle machine, ~2 min with stress-ng on both cores, over 4 min at load 40
    airflow.wait_started(timeout=float(os.environ.get("KR_AIRFLOW_TEST_START_TIMEOUT", "600")))
    print(f"\nAirflow started in {time.monotonic() - started:.1f}s at {airflow.base_url}")
