"""Session-wide fixtures: one real local Kafka stack for the whole test session.

By default the session starts its own stack under ``.stack/test`` on ports 29000+
(so it never collides with the demo's) and stops it at the end. Two variables point
the suite elsewhere instead:

- ``KR_TEST_STACK_DIR``: an already running local stack (``kstack`` folder); reused, not stopped.
- ``KR_BOOTSTRAP_SERVERS``: any existing cluster; the read-only tests run against it,
  the fault-injection tests (which kill brokers) refuse to and are skipped.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lane_environment(worker: str | None) -> None:
    """Give each test lane (an xdist worker, ``-n 2``) its own stack, Airflow, Celery and
    S3Proxy: ports shifted by 1000 (the fleet test's second cluster by 500, Airflow's by 40,
    Celery's by 100; all below 32768, where Linux's ephemeral ports begin) and folders of its
    own, derived from the values the run was given, so the lanes never meet."""
    index = int(worker[2:]) if worker and worker[2:].isdigit() else 0
    if index == 0:
        return
    env = os.environ

    def shifted(name: str, default: int, step: int) -> str:
        return str(int(env.get(name, default)) + step * index)

    env["KR_TEST_PORT_BASE"] = shifted("KR_TEST_PORT_BASE", 29000, 1000)
    env["KR_TEST_SECOND_PORT_BASE"] = shifted("KR_TEST_SECOND_PORT_BASE", 31000, 500)
    env["KR_AIRFLOW_TEST_PORT"] = shifted("KR_AIRFLOW_TEST_PORT", 28080, 40)
    env["KR_CELERY_PORT_BASE"] = shifted("KR_CELERY_PORT_BASE", 28200, 100)
    for name, folder in (
        ("KR_TEST_STACK_HOME", "test"),
        ("KR_AIRFLOW_TEST_HOME", "airflow-test"),
        ("KR_CELERY_TEST_HOME", "celery-test"),
        ("AIRFLOW_HOME", "airflow-unit"),
    ):
        env[name] = f"{env.get(name) or ROOT / '.stack' / folder}-gw{index}"


_lane_environment(os.environ.get("PYTEST_XDIST_WORKER"))
# Airflow reads its config on first import: keep the tests' Airflow out of ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", str(ROOT / ".stack" / "airflow-unit"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
# the suite's Spark JVMs (spark-submit, the Connect server, the in-process session) start with
# the quick JIT the stack's Kafka JVMs use: a third less CPU for a small analysis (local_spark.py)
os.environ.setdefault("KR_SPARK_DRIVER_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

from kafka_runbooks_dev.localstack import LocalStack, Topology, jars  # noqa: E402
from tests import compat  # noqa: E402

# ~20 s idle; 4 minutes were not enough with several stacks and stress-ng on 2 cores
START_TIMEOUT_S = float(os.environ.get("KR_TEST_STACK_START_TIMEOUT", "900"))


class ExternalCluster:
    """Stands in for LocalStack when the suite points at a cluster it must not break."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.connect_url = os.environ.get("KR_CONNECT_URL")


def _stack_home() -> Path:
    """The session's own stack folder (``KR_TEST_STACK_HOME``, default ``.stack/test``)."""
    return Path(os.environ.get("KR_TEST_STACK_HOME") or ROOT / ".stack" / "test")


@pytest.fixture(scope="session")
def session_stack():
    """The session's stack (or the cluster it points at); ``kafka_stack`` outside
    ``tests/integration``, where a ``compat`` copy's ``kafka_stack`` is its release's stack."""
    external = os.environ.get("KR_BOOTSTRAP_SERVERS")
    if external:
        yield ExternalCluster(external)
        return
    reuse = os.environ.get("KR_TEST_STACK_DIR")
    if reuse:
        stack = LocalStack(home=reuse)
        stack.start(timeout=START_TIMEOUT_S)
        yield stack
        return
    port_base = int(os.environ.get("KR_TEST_PORT_BASE", "29000"))
    home = _stack_home()
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.with_name(home.name + ".lock"), "w") as lock:
        try:  # a concurrent session owns this stack: never wipe it under its feet
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(f"another test session is using {home}; set KR_TEST_STACK_DIR to share one")
        # the release asked for (KR_KAFKA_VERSION, else the pinned one), never the one an earlier
        # session recorded in this folder: the stack is destroyed and formatted anew anyway
        stack = LocalStack(
            home=home, topology=Topology(port_base=port_base), kafka_version=compat.session_release()
        )
        stack.destroy()
        try:  # a start that times out must not leave its JVMs running
            stack.start(timeout=START_TIMEOUT_S)
            yield stack
        finally:
            stack.discard()  # formatted anew by the next session: nothing to shut down cleanly


@pytest.fixture(scope="session")
def kafka_stack(session_stack):
    """The stack the tests run against: the session's (``tests/integration`` overrides it)."""
    return session_stack


@pytest.fixture(scope="session")
def local_stack(kafka_stack) -> LocalStack:
    """The stack, for tests that inject faults: never an external cluster."""
    if not isinstance(kafka_stack, LocalStack):
        pytest.skip("fault injection refuses to run against an external cluster (KR_BOOTSTRAP_SERVERS)")
    return kafka_stack


@pytest.fixture(scope="session")
def kafka_config(kafka_stack) -> dict:
    return {"bootstrap.servers": kafka_stack.bootstrap_servers}


@pytest.fixture
def admin(kafka_config):
    from kafka_runbooks.admin import ClusterAdmin

    with ClusterAdmin(kafka_config, timeout_s=15) as client:
        yield client


@pytest.fixture(scope="session")
def airflow_connections(kafka_stack) -> dict:
    """Connections every Airflow started by the tests gets (same ids as the demo)."""
    if isinstance(kafka_stack, LocalStack):
        return kafka_stack.airflow_connections(spark_master="local[2]")
    conns = {
        "kafka_default": {
            "conn_type": "kafka",
            "extra": {"bootstrap.servers": kafka_stack.bootstrap_servers},
        },
        "spark_default": {"conn_type": "spark", "host": "local[2]"},
    }
    if kafka_stack.connect_url:
        conns["kafka_connect_default"] = {"conn_type": "http", "host": kafka_stack.connect_url}
    return conns


def _fully_replicated(admin) -> bool:
    state = admin.read_state(include_log_dirs=False)
    return (
        not state.offline()
        and not state.under_replicated()
        and all(b.available for b in state.brokers.values())
    )


@pytest.fixture
def restore_stack(local_stack, admin):
    """Give the test a healthy cluster and leave one behind: restart what it stopped, and wait
    until every node running another process than before the test (restarted by the test or
    here) is ready. A node still in its process from before was ready then, and readiness is
    read from each node's JMX exporter (a walk of every MBean: 0.3-0.9 s a node idle, seconds
    under load), so the eight reads of every node after each test were mostly spent on nodes
    the test never touched; the cluster is then checked fully replicated, as Kafka reports it."""
    from tests.helpers import wait_until

    wait_until(lambda: _fully_replicated(admin), 120, 1, "a fully replicated cluster before the test")
    before = {status.name: status.pid for status in local_stack.status()}
    yield local_stack
    for status in local_stack.status():
        if not status.running:
            local_stack.start_node(status.name)
    replaced = [s.name for s in local_stack.status() if s.pid is None or s.pid != before.get(s.name)]
    local_stack.wait_ready(replaced, 180)
    wait_until(lambda: _fully_replicated(admin), 180, 1, "a fully replicated cluster after the test")


@pytest.fixture
def connect(kafka_stack):
    """A client of the stack's Connect worker; connectors the test registers in
    ``client.created`` are deleted afterwards."""
    from tests.connect_helpers import WorkerClient

    lacking = (
        jars.lacks(kafka_stack.lib_dir, jars.FILE_CONNECTORS) if isinstance(kafka_stack, LocalStack) else None
    )
    if lacking is not None:  # every one of them runs file connectors: failed, with what the release lacks
        pytest.fail(f"these tests need the stack's Connect worker with its file connectors: {lacking.line()}")
    url = getattr(kafka_stack, "connect_url", None)
    if not url:
        pytest.fail(
            "these tests need the stack's Connect worker (set KR_CONNECT_URL for an external cluster)"
        )
    log_file = kafka_stack.log_file("connect") if isinstance(kafka_stack, LocalStack) else None
    with WorkerClient(url, log_file, timeout_s=60) as client:
        yield client
        for name in client.created:
            client.delete_connector(name)


def pytest_sessionfinish(session, exitstatus) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


_EXIT_STATUS = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """End the process with pytest's exit status once the summary is out.

    Clients the tests leave behind (librdkafka handles, kafka-python IO loops, py4j
    gateways) can block the interpreter's shutdown on brokers the session already
    stopped: CI once saw "482 passed" and then nothing until its time limit. The
    threads still alive are named first, so the culprit is visible.
    """
    import sys
    import threading
    import traceback

    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()
    frames = sys._current_frames()
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in stuck:
        stack = "".join(traceback.format_stack(frames.get(thread.ident))) if thread.ident in frames else ""
        sys.stderr.write(f"non-daemon thread left at exit: {thread.name}\n{stack}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(config.stash.get(_EXIT_STATUS, 0))


@pytest.fixture(scope="session")
def s3proxy():
    """A real S3Proxy (from Maven Central jars) on the test port base + 70, filesystem back end."""
    from kafka_runbooks_dev.localstack.s3proxy import PORT_OFFSET, S3Proxy

    port = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + PORT_OFFSET
    home = _stack_home().with_name(_stack_home().name + "-s3proxy")
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    proxy = S3Proxy(home, port)
    try:
        proxy.start(timeout_s=START_TIMEOUT_S)
        yield proxy
    finally:
        proxy.stop()


# ------------------------------------------------------------------ the order of the suite
# Unit tests first, so a mistake fails in a minute; then the Spark job tests, the real
# stack, the real Airflow, and the Celery fleet last. Within a folder pytest's order stays.
_STAGES = ("unit", "spark", "integration", "e2e", "celery")
# The suite runs in two lanes (`make test` passes -n 2), each an xdist worker with a stack of
# its own: most of a stack or Airflow test is waiting on the cluster, so two of them share
# the two cores well. Lanes are whole stages, so each lane's tests keep their order and
# share their lane's session fixtures (one stack, one Airflow).
LANES = {"unit": "stack", "spark": "stack", "integration": "stack", "e2e": "airflow", "celery": "airflow"}
# files that run in the other lane than their stage's, to even the lanes out (each keeps its
# stage's place in that lane's order): measured from the suite's "costliest test files"
LANE_OF_FILE: dict[str, str] = {
    # the stack lane was ~120 s longer (1642 against 1526 s on Nov 26); this file needs no Kafka
    # stack and no session Spark, so it runs first in the airflow lane, before its Airflow starts
    "tests/spark/test_compose_spark_cluster.py": "airflow",
    # the stack lane was ~180 s longer in the lead's loaded suite of Nov 27 (2 CPU stressors: its
    # last test ended 178 s after the airflow lane's; unit 323 + Spark 695 + integration 1220 s
    # against 130 + e2e 1650 + Celery 290 s). Neither file uses the session stack, its Spark or
    # its Connect server (76.1 and 17.2 s there): the dynamic quorum's stack (started for it and
    # stopped after it) and the compose launcher's nodes (ports base + 500) run in the airflow
    # lane as well, before its Airflow starts, and no extra start is paid
    "tests/integration/test_controller_replace.py": "airflow",
    "tests/integration/test_compose_kafka_launcher.py": "airflow",
}
# the whole `make test` must fit in half an hour on the 2-core CI machine (issue #25)
SUITE_BUDGET_S = 30 * 60


class _SuiteClock:
    """Where the run's time went, per test file and per stage, and whether a unit test failed."""

    def __init__(self) -> None:
        self.unit_failed = False
        self.by_file: dict[str, float] = {}
        self.started = time.monotonic()
        self.flag: Path | None = None  # shared by the lanes of one run: a unit test failed


_CLOCK = _SuiteClock()


def _stage_name(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[1] in _STAGES else "other"


def _stage_of(nodeid: str) -> int:
    name = _stage_name(nodeid)
    return _STAGES.index(name) if name in _STAGES else len(_STAGES)


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--kafka-compat",
        action="store_true",
        help="run the tests marked compat again on the oldest and the newest supported Kafka release "
        "(a stack of each; tests/compat.py)",
    )


def pytest_configure(config) -> None:
    uid = getattr(config, "workerinput", {}).get("testrunuid")
    if uid:
        _CLOCK.flag = ROOT / ".stack" / f"unit-failed-{uid}"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """One lane per xdist worker: a lane's tests go to one worker, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            release = compat.release_of(nodeid)  # a compat copy runs in its release's lane
            if release is not None:
                return compat.LANE_OF_RELEASE[release]
            return LANE_OF_FILE.get(nodeid.split("::")[0]) or LANES.get(_stage_name(nodeid), "stack")

    return LaneScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    items.sort(key=lambda item: (_stage_of(item.nodeid), compat.order_in_stage(item)))


def pytest_runtest_logreport(report) -> None:
    path = report.nodeid.split("::")[0]
    _CLOCK.by_file[path] = _CLOCK.by_file.get(path, 0.0) + report.duration
    if report.failed and _stage_of(report.nodeid) == 0:
        _CLOCK.unit_failed = True
        if _CLOCK.flag is not None:
            _CLOCK.flag.parent.mkdir(parents=True, exist_ok=True)
            _CLOCK.flag.touch()


def _unit_failed() -> bool:
    return _CLOCK.unit_failed or (_CLOCK.flag is not None and _CLOCK.flag.exists())


def pytest_runtest_setup(item) -> None:
    """Once a unit test failed, no slow test starts (in either lane): the run ends in
    minutes, not after half an hour of real stacks testing code known to be wrong
    (``KR_TEST_KEEP_GOING=1`` runs them anyway). A lane skips what is left, since an xdist
    worker cannot end the run; a single process ends it at once."""
    if _stage_of(item.nodeid) == 0 or not _unit_failed() or os.environ.get("KR_TEST_KEEP_GOING"):
        return
    why = "a unit test failed: the Spark, stack and Airflow tests were not started"
    if _CLOCK.flag is not None:
        pytest.skip(f"not run: {why}")
    pytest.exit(why, returncode=1)


def pytest_terminal_summary(terminalreporter) -> None:
    """Per stage and per file (setup + call + teardown), and the run against its budget."""
    write = terminalreporter.write_line
    stages: dict[str, float] = {}
    for path, seconds in _CLOCK.by_file.items():
        stage = _stage_name(path + "::")
        stages[stage] = stages.get(stage, 0.0) + seconds
    write("")
    write(
        "time per stage: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(stages.items(), key=lambda kv: -kv[1]))
    )
    costly = [(p, s) for p, s in sorted(_CLOCK.by_file.items(), key=lambda kv: -kv[1]) if s >= 10]
    write(f"the {len(costly)} test files of 10 s or more (the lanes' balance is planned from these):")
    for path, seconds in costly:
        write(f"  {seconds:7.1f} s  {path}")
    for line in compat.LEFT_OUT:
        write(f"compat copies not made: {line}")
    wall = time.monotonic() - _CLOCK.started
    verdict = "within" if wall <= SUITE_BUDGET_S else "OVER"
    write(f"suite wall time {wall:.0f} s: {verdict} its budget of {SUITE_BUDGET_S} s")


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory):
    """One real Spark Connect server for the session (test port base + 2), on the local data store.

    The jobs' Connect path runs against it exactly as an Airflow task does: a new session per run.
    Its scratch is a folder of the session's, removed once the server is gone (a JVM that does not
    exit cleanly leaves its ``spark-*``/``blockmgr-*``/``artifacts-*`` behind).
    """
    from kafka_runbooks_dev import spark_connect as connect_server

    port = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + connect_server.PORT_OFFSET
    scratch = tmp_path_factory.mktemp("spark-connect-scratch")
    log = ROOT / ".stack" / f"test-spark-connect-{port}.log"
    server = connect_server.start(port, log, store_url=str(ROOT), local_dir=scratch)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(scratch)
