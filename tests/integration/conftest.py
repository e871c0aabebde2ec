"""The integration lane's extra stacks: a JBOD stack and a dynamic quorum, each started once.

A few tests need a topology the session stack does not have (two log dirs per broker; a
controller quorum formatted as a dynamic one with a spare controller). Each such stack costs a
start of its own (~20 s idle, more under load) and ~0.2 cores while it idles, so it is started
once for the lane, on its first use, and stopped after the last test that uses it: the tests
that share one are run one after another (``pytest_collection_modifyitems`` below), so it never
idles through unrelated tests, and two extra stacks never run at once (they share the ports 600
above the session stack's base, below the next lane's).

Under ``--kafka-compat`` (``tests/compat.py``) a test marked ``compat`` runs again on the oldest
and the newest supported Kafka release: ``kafka_stack``, ``local_stack`` and ``kafka_config`` are
per test here, the session's stack for every other test and a stack of the copy's release for a
copy (the default shape, on the extra stacks' ports, started on its release's first copy and
stopped after its last, as the extra stacks are), and the JBOD and dynamic-quorum stacks are of
the copy's release too. A module-scoped fixture here takes ``session_stack``.

A failed log dir is not undone by a restart, so a test that needs every dir healthy asks for
``healthy_jbod_stack``: what an earlier test failed is put back (the broker stopped, its dir
returned, the broker started again, everything in sync) instead of a new stack being started.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks_dev.helpers import cluster_healthy
from kafka_runbooks_dev.localstack.stack import LocalStack, StackError
from kafka_runbooks_dev.localstack.topology import Topology
from tests import compat
from tests.helpers import wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
START_TIMEOUT_S = float(os.environ.get("KR_TEST_STACK_START_TIMEOUT", "900"))  # as the session stack's
EXTRA_PORT_OFFSET = 600  # above the session stack's ports (base..base+400), below the next lane's


def _home(suffix: str) -> Path:
    home = Path(os.environ.get("KR_TEST_STACK_HOME") or ROOT / ".stack" / "test")
    return home.with_name(home.name + suffix)


def _base() -> int:
    return int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + EXTRA_PORT_OFFSET


def _jbod_topology() -> Topology:
    """1 controller and 3 brokers with two log dirs each: a failed dir's replicas need a third
    broker to go to (two live brokers keep RF 2)."""
    return Topology(brokers=3, controllers=1, racks=("rack-a",), connect=False, port_base=_base(), log_dirs=2)


def _dynamic_topology() -> Topology:
    """3 controllers formatted with --initial-controllers, a spare formatted with
    --no-initial-controllers (an observer once started), 1 broker."""
    return Topology(
        brokers=1, controllers=3, connect=False, port_base=_base(), dynamic_quorum=True, spare_controllers=1
    )


def _secured_topology() -> Topology:
    """3 brokers (two racks), 1 controller and Connect, secured (``localstack/security.py``): SASL_SSL
    and mTLS listeners, the StandardAuthorizer, the least-privilege ``runbooks`` principal."""
    return Topology(brokers=3, controllers=1, connect=True, port_base=_base(), security="sasl_ssl")


def _release_topology() -> Topology:
    """A compat copy's stack: the session stack's shape (4 brokers, 3 voters, Connect)."""
    return Topology(port_base=_base())


class LaneStack:
    """One extra stack of the lane: started fresh on first use, stopped after its last user.
    ``release``: a compat copy's Kafka release (None: the session's)."""

    def __init__(self, suffix: str, topology: Callable[[], Topology], release: str | None = None) -> None:
        self.suffix, self.topology, self.release = suffix, topology, release
        self.stack: LocalStack | None = None

    def get(self) -> LocalStack:
        if self.stack is None:
            self.stack = self._start(attempts=2)
        return self.stack

    def _start(self, attempts: int) -> LocalStack:
        """A fresh stack; a node that exits while starting is tried once more from scratch (seen
        once on a loaded machine: a controller of a just-formatted stack gone before its first
        log line), with the failure printed for the next reader."""
        for attempt in range(1, attempts + 1):
            release = self.release or compat.session_release()  # never the one a folder recorded
            stack = LocalStack(home=_home(self.suffix), topology=self.topology(), kafka_version=release)
            stack.destroy()  # a stack left by an interrupted session or a failed attempt
            try:
                stack.start(timeout=START_TIMEOUT_S)
                return stack
            except StackError as exc:
                stack.stop()
                if attempt == attempts:
                    raise
                print(f"extra stack {self.suffix}: start attempt {attempt} failed, trying again: {exc}")
            except BaseException:  # a start that times out must not leave its JVMs running
                stack.stop()
                raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """After its last test: killed, not stopped cleanly (its next start formats it anew)."""
        if self.stack is not None:
            stack, self.stack = self.stack, None
            stack.discard()


SHAPES = {
    "jbod_stack": ("-jbod", _jbod_topology),
    "dynamic_stack": ("-dynamic-quorum", _dynamic_topology),
    "secured_stack": ("-secured", _secured_topology),
    "kafka_stack": ("-kafka", _release_topology),  # a compat copy's; the session's is in tests/conftest.py
}
# the lane's extra stacks, by shape and release (None: the session's), made on first use
LANE_STACKS: dict[tuple[str, str | None], LaneStack] = {}
# a fixture that needs one of the stacks above counts as its user
USES = {
    "jbod_stack": "jbod_stack",
    "healthy_jbod_stack": "jbod_stack",
    "dynamic_stack": "dynamic_stack",
    "secured_stack": "secured_stack",
}


def lane_stack(shape: str, release: str | None) -> LaneStack:
    """The lane's stack of this shape and release (a release's folders end in ``-kafka-<release>``)."""
    key = (shape, release)
    if key not in LANE_STACKS:
        suffix, topology = SHAPES[shape]
        if release is not None:
            suffix = f"{suffix}-{release}" if shape == "kafka_stack" else f"{suffix}-kafka-{release}"
        LANE_STACKS[key] = LaneStack(suffix, topology, release)
    return LANE_STACKS[key]


def _stack_of(item: pytest.Item) -> tuple[str, str | None] | None:
    if HERE not in Path(str(item.path)).resolve().parents:  # another folder's fixture of that name
        return None
    names = getattr(item, "fixturenames", ())
    release = compat.item_release(item)
    shape = next((stack for fixture, stack in USES.items() if fixture in names), None)
    if shape is None and release is not None and "kafka_stack" in names:
        shape = "kafka_stack"
    return (shape, release) if shape is not None else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Under ``--kafka-compat``, a test marked ``compat`` runs once per release: on the session's
    stack and on a stack of each other release (``tests/compat.py``)."""
    marker = metafunc.definition.get_closest_marker(compat.MARKER)
    if marker is None or not metafunc.config.getoption("--kafka-compat"):
        return
    if compat.RELEASE_ARG not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid} is marked compat but uses no stack")
    if os.environ.get("KR_BOOTSTRAP_SERVERS"):  # an external cluster: no stacks of our own
        return
    made, lacking = compat.copies_for(marker)
    compat.LEFT_OUT.extend(f"{metafunc.definition.nodeid}: {line}" for line in lacking)
    values = [None, *made]
    metafunc.parametrize(compat.RELEASE_ARG, values, ids=[compat.instance_id(v) for v in values])


@pytest.fixture
def kafka_release(request: pytest.FixtureRequest) -> str | None:
    """The Kafka release of a compat copy; None for the session's stack."""
    return getattr(request, "param", None)


@pytest.fixture
def kafka_stack(request: pytest.FixtureRequest, kafka_release: str | None):
    """The session's stack, or a compat copy's stack of its release (a copy never needs the
    session's)."""
    if kafka_release is None:
        return request.getfixturevalue("session_stack")
    return lane_stack("kafka_stack", kafka_release).get()


@pytest.fixture
def local_stack(kafka_stack) -> LocalStack:
    """The stack, for tests that inject faults: never an external cluster."""
    if not isinstance(kafka_stack, LocalStack):
        pytest.skip("fault injection refuses to run against an external cluster (KR_BOOTSTRAP_SERVERS)")
    return kafka_stack


@pytest.fixture
def kafka_config(kafka_stack) -> dict:
    """Client settings for the test's stack."""
    return {"bootstrap.servers": kafka_stack.bootstrap_servers}


@pytest.fixture
def jbod_stack(kafka_release: str | None) -> LocalStack:
    """The lane's JBOD stack as the previous test left it (a failed dir may still be failed)."""
    return lane_stack("jbod_stack", kafka_release).get()


@pytest.fixture
def healthy_jbod_stack(jbod_stack: LocalStack) -> LocalStack:
    """The lane's JBOD stack with every log dir healthy and every partition in sync."""
    restore_log_dirs(jbod_stack)
    return jbod_stack


@pytest.fixture
def secured_stack(kafka_release: str | None) -> LocalStack:
    """The lane's secured stack (tests/integration/test_secured_stack.py)."""
    return lane_stack("secured_stack", kafka_release).get()


@pytest.fixture
def dynamic_stack(kafka_release: str | None) -> LocalStack:
    """The lane's dynamic-quorum stack (one test changes its voters: it is used once)."""
    return lane_stack("dynamic_stack", kafka_release).get()


def restore_log_dirs(stack: LocalStack, timeout: float = 180) -> list[str]:
    """Put back every log dir ``LocalStack.fail_log_dir`` failed, as a disk that came back: the
    broker killed (a clean stop took ~2 s more and proves nothing here; its few segments are
    recovered at start), the placeholder file removed and the dir returned with its data, the
    broker started again (~10 s; a new stack took ~18 s and four JVMs); then wait until its
    DescribeLogDirs answer lists every dir online and every partition is in sync. Returns the
    brokers restarted."""
    restarted = []
    for node in stack.topology.broker_nodes:
        failed = [d for d in stack.log_dirs(node) if d.is_file()]
        if not failed:
            continue
        stack.kill(node.name)
        for path in failed:
            path.unlink()
            path.with_name(path.name + ".failed").rename(path)
        stack.start_node(node.name, wait=True, timeout=timeout)
        restarted.append(node.name)
    if restarted:
        with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}, timeout_s=15) as admin:
            wait_until(lambda: _dirs_online(admin, stack) and cluster_healthy(admin), timeout, 1, "dirs back")
    return restarted


def _dirs_online(admin: ClusterAdmin, stack: LocalStack) -> bool:
    ids = [n.node_id for n in stack.topology.broker_nodes]
    states, errors = admin.describe_log_dir_states(ids)
    return not errors and all(
        len(states.get(b, ())) == stack.topology.log_dirs and all(d.online for d in states[b]) for b in ids
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that share an extra stack run one after another, where the first of them was:
    the stack starts once and does not idle through the tests between them."""
    grouped: list[pytest.Item] = []
    last_of: dict[str, int] = {}
    for item in items:
        stack = _stack_of(item)
        if stack is None or stack not in last_of:
            grouped.append(item)
        else:
            grouped.insert(last_of[stack] + 1, item)
            last_of = {s: i + (i > last_of[stack]) for s, i in last_of.items()}
        if stack is not None:
            last_of[stack] = grouped.index(item)
    items[:] = grouped


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a group, its stack stops (the next test would not use it). Last, after
    the test's fixtures are torn down: a fixture that puts the stack back (``restore_stack`` starts
    the nodes a test stopped) would otherwise restart a stopped stack, which then holds the ports
    the next extra stack starts on (seen: a 4.4.0 copy's stack left running, the next one's JMX
    exporter 'Address already in use')."""
    stack = _stack_of(item)
    if stack is not None and (nextitem is None or _stack_of(nextitem) != stack):
        lane_stack(*stack).stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """An interrupted run still stops what it started."""
    for lane in LANE_STACKS.values():
        lane.stop()
