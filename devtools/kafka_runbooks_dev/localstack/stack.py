"""Start, stop, kill and inspect the local stack's JVMs.

Every node is a plain ``java`` process started from the jars of one Kafka release under
``.stack/lib-<version>`` (``KR_KAFKA_VERSION``, :mod:`.jars`); its
config, data, log and pid file live under ``<home>/<node-name>/``. The same code is
the restart back end the runbooks use against the local stack, so it must be honest
about what is running: a pid file alone is not proof, the process must be alive and
carry this stack's marker on its command line.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev.localstack import cds, jars, kraft_format, node_config, security
from kafka_runbooks_dev.localstack.jars import (  # noqa: F401 (their home before jars.py; imported from here)
    PROJECT_ROOT,
    STACK_ASSETS,
    StackError,
    _set_connect_plugins_apart,
    ensure_jars,
    fetch_with_maven,
    kafka_classpath,
)
from kafka_runbooks_dev.localstack.topology import BROKER, CONNECT, CONTROLLER, LOOPBACK, Node, Topology

log = logging.getLogger(__name__)

DEFAULT_HOME = PROJECT_ROOT / ".stack" / "demo"
JMX_EXPORTER_CONFIG = STACK_ASSETS / "jmx-exporter" / "kafka.yml"

HEAP = {BROKER: "-Xmx512m", CONTROLLER: "-Xmx256m", CONNECT: "-Xmx512m"}
MAIN_CLASS = {
    BROKER: "kafka.Kafka",
    CONTROLLER: "kafka.Kafka",
    CONNECT: "org.apache.kafka.connect.cli.ConnectDistributed",
}
BROKER_STATE_RUNNING = 3


@dataclass(frozen=True)
class NodeStatus:
    name: str
    node_id: int
    role: str
    running: bool
    pid: int | None
    address: str
    metrics_url: str
    rack: str | None

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout):
            return True
    except OSError:
        return False


def _http_get(url: str, timeout: float = 2.0, auth: tuple[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)  # noqa: S310 (loopback only)
    if auth is not None:  # HTTP basic auth (a secured stack's Connect worker)
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 (loopback only)
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def read_gauge(metrics_text: str, name: str) -> float | None:
    """Sum of the samples of one metric in a Prometheus exposition, or None if absent."""
    from prometheus_client.parser import text_string_to_metric_families

    total, seen = 0.0, False
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
                seen = True
    return total if seen else None


class LocalStack:
    """A local KRaft cluster plus a Connect worker, controlled as OS processes."""

    def __init__(
        self,
        home: Path | str | None = None,
        topology: Topology | None = None,
        lib_dir: Path | str | None = None,
        kafka_version: str | None = None,
    ) -> None:
        self.home = Path(home or os.environ.get("KR_STACK_DIR") or DEFAULT_HOME).resolve()
        state = self._state()  # a stack keeps its shape and its release, once started
        # ``kafka_version`` (a release or a line) stands where KR_KAFKA_VERSION would: the tests'
        # compat stacks run another release than the session's in the same process
        asked = {jars.ENV: kafka_version} if kafka_version else None
        self.kafka_version = jars.selected(asked, recorded=state.get("kafka_version"))
        self.lib_dir = Path(lib_dir or jars.lib_dir_for(self.kafka_version)).resolve()
        if topology is None and "topology" in state:
            topology = Topology.from_json(state["topology"])
        self.topology = topology or Topology.from_env()
        self._children: dict[str, subprocess.Popen] = {}

    # ---------------------------------------------------------------- inspection
    @property
    def bootstrap_servers(self) -> str:
        return self.topology.bootstrap_servers

    @property
    def connect_url(self) -> str | None:
        """The Connect worker's REST URL; None without one (none in the topology, or its release's
        Connect jars not served: :meth:`lacking` says)."""
        return None if self._lacks_connect() else self.topology.connect_url

    def lacking(self) -> list[jars.Missing]:
        """The parts of the stack its release's jars lack (Maven Central did not serve them), and
        what a secured stack lacks beyond them (:func:`security.missing`)."""
        return jars.missing_parts(self.lib_dir) + security.missing(self)

    def _lacks_connect(self) -> jars.Missing | None:
        """Why no Connect worker can start: the first part :meth:`lacking` names that is it."""
        return next((m for m in self.lacking() if m.part == jars.CONNECT_WORKER), None)

    @property
    def cluster_id(self) -> str:
        return self._state()["cluster_id"]

    def node(self, ref: str | int) -> Node:
        return self.topology.node(ref)

    def node_dir(self, node: Node) -> Path:
        return self.home / node.name

    def log_dirs(self, node: Node) -> list[Path]:
        """A node's log directories: ``data`` (its metadata log too), then ``data-2``... for a
        broker of a topology with several (``Topology.log_dirs``)."""
        extra = self.topology.log_dirs if node.role == BROKER else 1
        return [self.node_dir(node) / "data"] + [
            self.node_dir(node) / f"data-{i}" for i in range(2, extra + 1)
        ]

    def fail_log_dir(self, ref: str | int, index: int) -> Path:
        """Make a broker's log dir ``index`` (2 = ``data-2``; never 1, which holds the metadata log)
        fail the way a dead disk does: the directory is moved aside and a plain file put in its
        place, so the broker's next write in it (the replication-offset checkpoint every 5 s, a
        segment roll) gets an I/O error and Kafka marks the directory offline. Chmod is no use:
        the stack runs as whoever started it, root included. Returns where the data went."""
        node = self.node(ref)
        if node.role != BROKER or not 2 <= index <= self.topology.log_dirs:
            raise StackError(f"{node.name} has no log dir {index} that can be failed")
        path = self.log_dirs(node)[index - 1]
        aside = path.with_name(path.name + ".failed")
        path.rename(aside)
        path.write_text("a failed disk (kstack fail_log_dir)\n")
        return aside

    def log_file(self, ref: str | int) -> Path:
        return self.node_dir(self.node(ref)) / "server.log"

    def pid(self, ref: str | int) -> int | None:
        """The node's live process: this object's own child while it runs (a /proc read of a JVM
        starting under load once missed it, and the stack was torn down as "exited while starting"
        with the JVM still running), else the pid file's if it still names it, else found by its marker.

        The scan catches a JVM whose pid file was lost or overwritten (a second start that
        raced the first, a wiped folder), so stop and kill never leave an orphan running.
        """
        node = self.node(ref)
        child = self._children.get(node.name)
        if child is not None and child.poll() is None:
            return child.pid  # launched by this object and not exited: its own answer, no /proc read
        pid_file = self.node_dir(node) / "pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            pid = None
        if pid is not None and self._is_our_process(pid, node):
            return pid
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and self._is_our_process(int(entry.name), node):
                return int(entry.name)
        return None

    def is_running(self, ref: str | int) -> bool:
        return self.pid(ref) is not None

    def status(self) -> list[NodeStatus]:
        return [
            NodeStatus(
                name=n.name,
                node_id=n.node_id,
                role=n.role,
                running=self.is_running(n.name),
                pid=self.pid(n.name),
                address=n.address,
                metrics_url=n.metrics_url,
                rack=n.rack,
            )
            for n in self.topology.nodes
        ]

    def metrics(self, ref: str | int, timeout: float = 10.0) -> str | None:
        """The node's exporter page; a scrape takes 4-6 s at load 30 on 2 cores, so 2 s read a ready node as down."""
        status, body = _http_get(self.node(ref).metrics_url, timeout)
        return body if status == 200 else None

    def broker_state(self, ref: str | int) -> int | None:
        text = self.metrics(ref)
        if text is None:
            return None
        value = read_gauge(text, "kafka_server_brokerstate")
        return None if value is None else int(value)

    def is_ready(self, ref: str | int) -> bool:
        node = self.node(ref)
        if not self.is_running(node.name):
            return False
        if node.role == BROKER:
            return self.broker_state(node.name) == BROKER_STATE_RUNNING
        if node.role == CONTROLLER:
            text = self.metrics(node.name)
            leader = read_gauge(text, "kafka_server_raft_metrics_current_leader") if text else None
            return _port_open(node.port) and leader is not None and leader >= 0
        status, _ = _http_get(f"{self.connect_url}/connector-plugins", auth=security.connect_auth(self))
        return status == 200

    def client_config(self, principal: str = security.RUNBOOKS, auth: str = "sasl_ssl") -> dict:
        """Client settings (librdkafka keys) for this stack: the bootstrap servers alone, or on a
        secured stack ``principal``'s credentials over ``sasl_ssl`` or ``mtls`` (:mod:`.security`)."""
        return security.client_config(self, principal, auth)

    def airflow_connections(
        self, spark_master: str = "local[*]", kafka_auth: str = "sasl_ssl"
    ) -> dict[str, dict]:
        """The Airflow connections (conn_id -> JSON) that point the runbooks at this stack; on a
        secured one as the ``runbooks`` principal, over ``kafka_auth`` (``sasl_ssl`` or ``mtls``),
        and Connect's with its basic-auth login."""
        # every node's JMX exporter: the restart runbook probes brokers, the metadata-error
        # sweep reads brokers and controllers
        nodes = self.topology.broker_nodes + self.topology.controller_nodes
        endpoints = {str(n.node_id): n.metrics_url for n in nodes}
        conns = {
            "kafka_default": {"conn_type": "kafka", "extra": self.client_config(auth=kafka_auth)},
            "spark_default": self._spark_connection(spark_master),
            "kafka_broker_probe_default": {
                "conn_type": "generic",
                "extra": {"kind": "prometheus", "endpoints": endpoints},
            },
            "kafka_restart_default": {
                "conn_type": "generic",
                "extra": {"backend": "localstack", "stack_home": str(self.home)},
            },
        }
        if self.connect_url:
            conns["kafka_connect_default"] = {"conn_type": "http", "host": self.connect_url}
            if not self.topology.secured:  # its principal has no READ on the workers' topics
                conns["kafka_connect_default"]["extra"] = {"status_topic": node_config.CONNECT_STATUS_TOPIC}
            login = security.connect_auth(self)
            if login is not None:
                conns["kafka_connect_default"].update(login=login[0], password=login[1])
        return conns

    def _spark_connection(self, spark_master: str) -> dict:
        """The stack's Spark Connect server while it runs (analyses start in seconds), else
        spark-submit with ``spark_master`` (each analysis starts its own JVM and session)."""
        from kafka_runbooks_dev import spark_connect

        port = spark_connect.running(self.home)
        if port is None:
            return {"conn_type": "spark", "host": spark_master}
        return {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port}

    @property
    def spark_connect_port(self) -> int:
        """``$KR_SPARK_CONNECT_PORT``, else the stack's port base + 2."""
        from kafka_runbooks_dev import spark_connect

        explicit = os.environ.get(spark_connect.PORT_ENV)
        return int(explicit) if explicit else self.topology.port_base + spark_connect.PORT_OFFSET

    @property
    def spark_connect_conf(self) -> dict[str, str]:
        """The stack's Connect server's driver and block manager ports, pinned to the port base + 3
        and + 4 (Spark's default is an ephemeral port each): every port the stack opens moves with
        the base."""
        from kafka_runbooks_dev import spark_connect

        return spark_connect.internal_ports_conf(self.topology.port_base)

    def start_spark_connect(self, store_url: str | None = None) -> str:
        """Start the stack's long-lived Spark Connect server (kept if it runs); its ``sc://`` URL."""
        from kafka_runbooks_dev import spark_connect

        self.home.mkdir(parents=True, exist_ok=True)
        return spark_connect.start_recorded(
            self.home, self.spark_connect_port, store_url=store_url, conf=self.spark_connect_conf
        )

    # ---------------------------------------------------------------- lifecycle
    def start(self, wait: bool = True, timeout: float = 240.0) -> LocalStack:
        """Start every node that is not running (a part its release lacks is said, in one line
        each, and left out); wait until all are ready."""
        ensure_jars(self.lib_dir, self.kafka_version)
        self._write_state()
        for missing in self.lacking():
            log.warning("%s", missing.line())
        groups = [
            self.topology.controller_nodes,
            self.topology.broker_nodes,
            [self.topology.connect_node] if self.connect_url else [],
        ]
        deadline = time.monotonic() + timeout
        for group in groups:
            for node in group:
                self.start_node(node.name, wait=False)
            if wait:
                self.wait_ready([n.name for n in group], max(1.0, deadline - time.monotonic()))
        if wait and self.topology.secured:
            security.grant(self)  # the runbooks' principal: exactly the ACLs the runbooks need
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the Spark Connect server and every node cleanly (Connect, brokers, then controllers)."""
        from kafka_runbooks_dev import spark_connect

        spark_connect.stop_recorded(self.home)
        order = (
            ([self.topology.connect_node] if self.topology.connect_node else [])
            + list(reversed(self.topology.broker_nodes))
            + self.topology.controller_nodes
            + self.topology.spare_controller_nodes
        )
        brokers = [n for n in order if n.role != CONTROLLER]
        for node in brokers:
            self._signal(node, signal.SIGTERM)
        self._wait_exit(brokers, timeout)
        controllers = [n for n in order if n.role == CONTROLLER]
        for node in controllers:
            self._signal(node, signal.SIGTERM)
        self._wait_exit(controllers, timeout)

    def discard(self) -> None:
        """Stop a stack whose data nothing reads again (a test session's, formatted anew at its next
        start) at once: SIGKILL every node. A clean stop of every broker at once waits out controlled
        shutdowns that cannot move leadership anywhere (a secured stack's teardown took 61 s)."""
        from kafka_runbooks_dev import spark_connect

        spark_connect.stop_recorded(self.home)
        nodes = [n for n in self.topology.nodes if self.is_running(n.name)]
        for node in nodes:
            self._signal(node, signal.SIGKILL)
        self._wait_exit(nodes, 30.0)

    def destroy(self) -> None:
        """Stop everything and delete the stack's data."""
        self.stop()
        if self.home.exists():
            shutil.rmtree(self.home)

    def start_node(self, ref: str | int, wait: bool = False, timeout: float = 120.0) -> None:
        node = self.node(ref)
        if self.is_running(node.name):
            log.info("%s is already running", node.name)
        else:
            ensure_jars(self.lib_dir, self.kafka_version)
            self._write_state()
            if node.role == CONNECT and (lacking := self._lacks_connect()):
                raise StackError(lacking.line())
            self._launch(node)
        if wait:
            self.wait_ready([node.name], timeout)

    def stop_node(self, ref: str | int, timeout: float = 60.0) -> None:
        """Clean stop: SIGTERM (a broker does a controlled shutdown), SIGKILL after timeout."""
        node = self.node(ref)
        self._signal(node, signal.SIGTERM)
        self._wait_exit([node], timeout)

    def kill(self, ref: str | int) -> None:
        """kill -9: the node gets no chance to flush or shut down cleanly."""
        node = self.node(ref)
        self._signal(node, signal.SIGKILL)
        self._wait_exit([node], 30.0)

    def freeze(self, ref: str | int) -> None:
        """SIGSTOP: the node keeps its sockets open and answers nothing (a stalled JVM, a
        paused VM), which a crash does not reproduce. Always :meth:`thaw` it afterwards."""
        self._signal(self.node(ref), signal.SIGSTOP)

    def thaw(self, ref: str | int) -> None:
        """SIGCONT: a frozen node runs on from where it stopped."""
        self._signal(self.node(ref), signal.SIGCONT)

    def restart_node(self, ref: str | int, timeout: float = 120.0) -> None:
        self.stop_node(ref, timeout)
        self.start_node(ref)

    def wait_ready(self, refs: Iterable[str | int], timeout: float = 120.0) -> None:
        pending = [self.node(r).name for r in refs]
        deadline = time.monotonic() + timeout
        relaunched: set[str] = set()
        while pending:
            pending = [name for name in pending if not self.is_ready(name)]
            for name in [n for n in pending if not self.is_running(n)]:
                child, node_dir = self._children.get(name), self.node_dir(self.node(name))
                killed = killed_before_writing(child, (self.log_file(name), node_dir / "stdout.log"))
                if killed and name not in relaunched:  # one more launch: it never got to start
                    log.warning(
                        "%s was killed by signal %s before writing anything: launching it again", name, killed
                    )
                    relaunched.add(name)
                    self._launch(self.node(name))
                    continue
                code = None if child is None else child.poll()
                raise StackError(
                    f"{name} exited while starting (exit code {code}); see {self.log_file(name)}:\n{self._tail(name)}"
                )
            if not pending:
                return
            if time.monotonic() > deadline:
                raise StackError(f"not ready after {timeout:.0f}s: {', '.join(pending)}")
            time.sleep(0.5)

    # ---------------------------------------------------------------- internals
    def _state(self) -> dict:
        state = self.home / "stack.json"
        if state.exists():
            return json.loads(state.read_text())
        return {}

    def _write_state(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        state = self._state()
        state.setdefault("cluster_id", kraft_format.new_kafka_uuid())
        kraft_format.record_release(self, state)
        state["topology"] = self.topology.to_json()
        (self.home / "stack.json").write_text(json.dumps(state, indent=2))

    def _marker(self, node: Node) -> str:
        return f"-Dkr.node={self.home}/{node.name}"

    def _is_our_process(self, pid: int, node: Node) -> bool:
        child = self._children.get(node.name)
        if child is not None and child.pid == pid and child.poll() is not None:
            return False  # reaped: it exited
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
        return self._marker(node).encode() in cmdline

    def _signal(self, node: Node, sig: int) -> None:
        pid = self.pid(node.name)
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def _wait_exit(self, nodes: list[Node], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for node in nodes:
            while self.is_running(node.name):
                if time.monotonic() > deadline:
                    log.warning("%s did not stop within %.0fs: killing it", node.name, timeout)
                    self._signal(node, signal.SIGKILL)
                    deadline = time.monotonic() + 30
                time.sleep(0.2)
            child = self._children.pop(node.name, None)
            if child is not None:
                child.wait(timeout=5)

    def _tail(self, name: str, lines: int = 30) -> str:
        text = ""
        for f in (self.log_file(name), self.node_dir(self.node(name)) / "stdout.log"):
            if f.exists():
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def _classpath(self, node: Node) -> str:
        """The Kafka jars; a secured stack's Connect worker's end with its basic-auth extension."""
        extra = security.connect_jars(self) if node.role == CONNECT else []
        return os.pathsep.join([kafka_classpath(self.lib_dir), *map(str, extra)])

    def _agent(self) -> Path:
        agents = sorted(self.lib_dir.glob("jmx_prometheus_javaagent-*.jar"))
        if not agents:
            raise StackError(f"no JMX exporter agent in {self.lib_dir}")
        return agents[-1]

    def _launch(self, node: Node) -> None:
        ndir = self.node_dir(node)
        ndir.mkdir(parents=True, exist_ok=True)
        config = ndir / ("worker.properties" if node.role == CONNECT else "server.properties")
        config.write_text(render_properties(self._properties(node)))
        if node.role != CONNECT:
            kraft_format.format_storage(self, node, config)
        classpath = self._classpath(node)
        cmd = [
            "java",
            HEAP[node.role],
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            *cds.jvm_flags(self.lib_dir, kafka_classpath(self.lib_dir)),  # a prefix of classpath
            *security.jvm_flags(self, node),
            "-Djava.awt.headless=true",
            self._marker(node),
            f"-Dkr.log.file={ndir / 'server.log'}",
            f"-Dlog4j2.configurationFile={STACK_ASSETS / 'log4j2.properties'}",
            f"-javaagent:{self._agent()}={LOOPBACK}:{node.metrics_port}:{JMX_EXPORTER_CONFIG}",
            "-cp",
            classpath,
            MAIN_CLASS[node.role],
            str(config),
        ]
        stdout = open(ndir / "stdout.log", "ab")  # noqa: SIM115 (owned by the child)
        proc = subprocess.Popen(
            cmd, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        stdout.close()
        self._children[node.name] = proc
        (ndir / "pid").write_text(str(proc.pid))
        log.info("started %s (pid %s)", node.name, proc.pid)

    def _properties(self, node: Node) -> dict[str, str]:
        """The node's server.properties (or worker.properties): :mod:`.node_config`, secured by
        :mod:`.security` on a stack of ``Topology(security="sasl_ssl")``."""
        return node_config.properties(self, node)


def killed_before_writing(child: subprocess.Popen | None, logs: tuple[Path, ...]) -> int | None:
    """The signal that ended ``child`` before it wrote a byte to ``logs``, else None. A node killed
    so never got to start, which is not its own failure: seen once in a full suite, a Connect
    worker gone within a second of its launch with no output at all (no exit code was kept)."""
    code = None if child is None else child.poll()
    if code is None or code >= 0 or any(f.exists() and f.stat().st_size for f in logs):
        return None
    return -code


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())
