"""One long-lived Spark Connect server on this machine, for the local stack, the tests and the bench.

A ``spark-submit`` per analysis pays for a JVM, a SparkSession and Python workers every time
(20-30 s here, for a second of work). A Spark Connect server pays for them once; each task then
opens a session over gRPC. This starts ``SparkConnectServer`` with this venv's PySpark (its jars
carry the Connect server) in ``local[2]`` mode, bound to 127.0.0.1, waits until it answers and
stops it. On an ``s3://`` data store the server gets the store's S3A settings, the S3A jars and
the store's keys in its environment, so it reads and writes the same objects as the client.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev.local_spark import spark_submit_command
from kafka_runbooks_dev.processes import group_alive

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
PORT_OFFSET = 2  # from the stack's (or the test session's) port base
# the stack's server's two internal ports (its driver's RPC and its block manager), from the same
# base: Spark binds both to an ephemeral port unless told, and then they neither move with the
# base nor show in the README's port list
DRIVER_PORT_OFFSET = 3
BLOCK_MANAGER_PORT_OFFSET = 4
PORT_ENV = "KR_SPARK_CONNECT_PORT"
START_TIMEOUT_S = 240.0  # a JVM and a SparkSession on a loaded 2-core machine


def default_port() -> int:
    """``$KR_SPARK_CONNECT_PORT``, else the stack's port base + 2 (19002 by default)."""
    explicit = os.environ.get(PORT_ENV)
    if explicit:
        return int(explicit)
    return int(os.environ.get("KR_STACK_PORT_BASE", "19000")) + PORT_OFFSET


def internal_ports_conf(port_base: int) -> dict[str, str]:
    """Spark settings that pin a server's driver RPC port and block manager port to ``port_base``
    + 3 and + 4. ``spark.port.maxRetries`` 0: a port already taken fails the server's start with
    Spark's "could not bind" in its log, instead of Spark binding the next free port, outside the
    stack's listed ports."""
    return {
        "spark.driver.port": str(port_base + DRIVER_PORT_OFFSET),
        "spark.blockManager.port": str(port_base + BLOCK_MANAGER_PORT_OFFSET),
        "spark.port.maxRetries": "0",
    }


def url_of(port: int, host: str = "127.0.0.1") -> str:
    """The ``sc://`` URL a client (and Airflow's ``spark_connect`` connection) uses."""
    return f"sc://{host}:{port}"


@dataclass
class ConnectServer:
    """A running server: its URL, process and log file."""

    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return url_of(self.port)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the server's process group (spark-submit and its JVM), SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests of a server dying mid-job)."""
        _signal_group(self.process, signal.SIGKILL)
        self.process.wait(timeout=30)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def server_command(
    port: int,
    *,
    store_url: str | None = None,
    conf: dict[str, str] | None = None,
    local_dir: Path | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of a Connect server on 127.0.0.1:``port`` that reaches the data store.

    For an ``s3://`` store: the store's S3A settings, the S3A jars (fetched once) on the
    driver's class path and its keys in the server's environment, where S3A's default
    credential chain reads them. The jars go on the class path, as the Spark images carry them,
    not in ``spark.jars``: in local mode the executor would copy all 658 MB of them into its
    scratch folder at the first job of every server. ``conf`` adds or overrides Spark
    settings; ``local_dir`` holds the server's scratch (``local_spark.local_dir_settings``).
    """
    from kafka_runbooks import storage

    url = store_url or storage.data_url()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "WARN",
    }
    if storage.protocol_of(url) == "s3":
        from kafka_runbooks_dev.local_spark import ensure_s3a_jars

        settings.update(storage.spark_conf(url))
        settings["spark.driver.extraClassPath"] = ":".join(str(j) for j in ensure_s3a_jars())
    argv, env = spark_submit_command(
        "spark-internal", [], master="local[2]", conf={**settings, **(conf or {})}, local_dir=local_dir
    )
    env.update(storage.s3_environment(url))
    at = argv.index("spark-internal")
    return [*argv[:at], "--class", SERVER_CLASS, "--name", "kafka-runbooks-connect", *argv[at:]], env


def start(
    port: int,
    log_path: Path,
    *,
    store_url: str | None = None,
    conf: dict[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    local_dir: Path | None = None,
) -> ConnectServer:
    """Start a server and return it once it accepts connections; its log goes to ``log_path``."""
    server = spawn(port, log_path, store_url=store_url, conf=conf, local_dir=local_dir)
    try:
        wait_answering(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def spawn(
    port: int,
    log_path: Path,
    *,
    store_url: str | None = None,
    conf: dict[str, str] | None = None,
    local_dir: Path | None = None,
) -> ConnectServer:
    """Start a server without waiting for it (:func:`wait_answering` does): a caller can start
    other things while its JVM comes up."""
    argv, env = server_command(port, store_url=store_url, conf=conf, local_dir=local_dir)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return ConnectServer(port, process, log_path)


def wait_answering(server: ConnectServer, timeout_s: float) -> None:
    """Until the gRPC port accepts a connection; a server that exited first fails with its log's tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = server.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(
                f"Spark Connect server on port {server.port} exited ({server.process.returncode}):\n{tail}"
            )
        if answers(server.port):
            return
        time.sleep(0.5)
    raise TimeoutError(f"Spark Connect server on port {server.port} did not answer within {timeout_s:.0f} s")


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on the port."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------- a server that outlives its starter
# ``kstack``/``make demo`` start the server and exit; ``stop`` is another process: the server's
# process group id and port are recorded in the stack's folder.
RECORD = "spark-connect.json"


def start_recorded(
    home: Path, port: int, *, store_url: str | None = None, conf: dict[str, str] | None = None
) -> str:
    """Start a server for the stack in ``home`` unless its recorded one still answers; its URL.
    ``conf``: Spark settings for it (the stack's pinned internal ports)."""
    import json

    recorded = running(home)
    if recorded is not None:
        return url_of(recorded)
    server = start(port, home / "spark-connect.log", store_url=store_url, conf=conf)
    (home / RECORD).write_text(json.dumps({"pid": server.process.pid, "port": port}))
    return server.url


def running(home: Path) -> int | None:
    """The recorded server's port while its process lives and the port answers, else None."""
    import json

    try:
        record = json.loads((home / RECORD).read_text())
        os.killpg(int(record["pid"]), 0)
    except (FileNotFoundError, ValueError, KeyError, ProcessLookupError, PermissionError):
        return None
    return int(record["port"]) if answers(int(record["port"])) else None


def stop_recorded(home: Path, timeout_s: float = 30.0) -> None:
    """Stop the recorded server (SIGTERM to its group, SIGKILL after ``timeout_s``); forget it."""
    import json

    path = home / RECORD
    try:
        pid = int(json.loads(path.read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError):
        return
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and group_alive(pid):
            time.sleep(0.2)
        if not group_alive(pid):
            break
    path.unlink(missing_ok=True)
