"""docker-compose.yaml's Kafka nodes, run for real without Docker: the three controllers and
broker 1 are started by the compose's own launcher (docker/kafka/kafka-node.sh) with the
compose's own environment, moved to loopback ports, and checked with the compose's own
health checks (curl on the JMX exporter). This proves the rendered properties are a
valid Kafka 4.3.1 configuration, that formatting uses CLUSTER_ID, and that the health
checks really see a running broker and a controller quorum.

The image's Kafka distribution scripts are stood in for by two lines each
(``kafka-storage.sh`` and ``kafka-server-start.sh`` run the same main classes, with
KAFKA_HEAP_OPTS and KAFKA_OPTS, on the local stack's pinned jars)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from kafka_runbooks_dev.localstack.stack import STACK_ASSETS, ensure_jars
from tests.helpers import wait_until
from tests.unit.test_docker_compose import load_compose

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "docker" / "kafka" / "kafka-node.sh"
LOOPBACK = "127.0.0.1"
NODES = ("controller-9001", "controller-9002", "controller-9003", "broker-1")
JMX_AGENT = re.compile(r"-javaagent:\S+=(\d+):\S+")


PORT_OFFSET = (
    500  # from the lane's port base: base+500..+511, clear of the stacks (+80 and up at +0 and +600)
)


def _lane_ports() -> dict[str, dict[str, int]]:
    """Fixed ports below Linux's ephemeral range (32768+), in this lane's block.

    Ports picked by binding to 0 came from the ephemeral range, where an outgoing connection
    of the other lane could take one before Kafka bound it; CI saw a controller exit for it."""
    base = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + PORT_OFFSET
    roles = ("main", "metrics", "external")
    return {name: {role: base + 3 * i + j for j, role in enumerate(roles)} for i, name in enumerate(NODES)}


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(none)"


def _env(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in service["environment"].items()}


def _fake_kafka_home(path: Path, classpath: str) -> Path:
    """bin/kafka-storage.sh and bin/kafka-server-start.sh on the local stack's jars."""
    (path / "bin").mkdir(parents=True)
    (path / "config").mkdir()
    log4j = (
        f"-Dlog4j2.configurationFile={STACK_ASSETS / 'log4j2.properties'} -Dkr.log.file={path / 'server.log'}"
    )
    scripts = {
        "kafka-storage.sh": f'exec java $KAFKA_OPTS {log4j} -cp "{classpath}" kafka.tools.StorageTool "$@"',
        "kafka-server-start.sh": (
            f"exec java $KAFKA_HEAP_OPTS -XX:+UseSerialGC -XX:TieredStopAtLevel=1 $KAFKA_OPTS {log4j} "
            f'-cp "{classpath}" kafka.Kafka "$1"'
        ),
    }
    for name, body in scripts.items():
        script = path / "bin" / name
        script.write_text(f"#!/usr/bin/env bash\n{body}\n")
        script.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    services = load_compose()["services"]
    lib = ensure_jars()
    classpath = os.pathsep.join(
        str(j) for j in sorted(lib.glob("*.jar")) if not j.name.startswith("jmx_prometheus")
    )
    [agent_jar] = sorted(lib.glob("jmx_prometheus_javaagent-*.jar"))
    ports = _lane_ports()
    root = tmp_path_factory.mktemp("compose-kafka")

    def localise(name: str, value: str) -> str:
        for other in NODES:
            value = value.replace(f"{other}:9093", f"{LOOPBACK}:{ports[other]['main']}")
        p = ports[name]
        value = value.replace("CONTROLLER://:9093", f"CONTROLLER://{LOOPBACK}:{p['main']}")
        value = re.sub(r"PLAINTEXT://[\w.-]*:9092", f"PLAINTEXT://{LOOPBACK}:{p['main']}", value)
        value = re.sub(r"EXTERNAL://[\w.-]*:\d+", f"EXTERNAL://{LOOPBACK}:{p['external']}", value)
        return JMX_AGENT.sub(
            f"-javaagent:{agent_jar}={LOOPBACK}:{p['metrics']}:{ROOT / 'stack' / 'jmx-exporter' / 'kafka.yml'}",
            value,
        )

    procs: dict[str, subprocess.Popen] = {}
    checks: dict[str, str] = {}
    try:
        for name in NODES:
            service = services[name]
            env = {k: localise(name, v) for k, v in _env(service).items()}
            env["KAFKA_LOG_DIRS"] = str(root / name / "data")
            home = _fake_kafka_home(root / name / "home", classpath)
            run_env = {"PATH": os.environ["PATH"], "HOME": str(root), "KAFKA_HOME": str(home), **env}
            if "JAVA_HOME" in os.environ:
                run_env["JAVA_HOME"] = os.environ["JAVA_HOME"]
            log = open(root / name / "stdout.log", "wb")  # noqa: SIM115 (owned by the child)
            procs[name] = subprocess.Popen(
                ["bash", str(LAUNCHER)],
                env=run_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            kind, command = service["healthcheck"]["test"]
            assert kind == "CMD-SHELL"
            metrics_port = JMX_AGENT.search(_env(service)["KAFKA_OPTS"]).group(1)
            checks[name] = command.replace(
                f"localhost:{metrics_port}", f"{LOOPBACK}:{ports[name]['metrics']}"
            )

        def healthy(name: str) -> bool:
            if procs[name].poll() is not None:
                raise AssertionError(
                    f"{name} exited:\n{_tail(root / name / 'stdout.log')}\n"
                    f"server.log:\n{_tail(root / name / 'home' / 'server.log')}"
                )
            return subprocess.run(["sh", "-c", checks[name]], capture_output=True).returncode == 0

        for name in NODES:
            wait_until(lambda n=name: healthy(n), timeout=240, interval=1, what=f"{name} healthy")
        yield {"ports": ports, "root": root, "services": services, "checks": checks}
    finally:
        # throwaway nodes: killed, not stopped (SIGTERM to all at once left the broker's
        # controlled shutdown waiting on controllers shutting down too, 60 s in the last run)
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs.values():
            proc.wait(timeout=30)


def test_the_launcher_formats_with_the_compose_cluster_id_and_renders_the_compose_settings(nodes):
    cluster_id = _env(nodes["services"]["broker-1"])["CLUSTER_ID"]
    for name in NODES:
        meta = (nodes["root"] / name / "data" / "meta.properties").read_text()
        assert f"cluster.id={cluster_id}" in meta, name
    rendered = (nodes["root"] / "broker-1" / "home" / "config" / "kafka-runbooks-node.properties").read_text()
    assert "broker.rack=rack-a" in rendered and "min.insync.replicas=2" in rendered


def test_the_broker_runs_with_its_rack_and_the_cluster_wide_min_isr(nodes):
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": f"{LOOPBACK}:{nodes['ports']['broker-1']['external']}"})
    cluster = admin.describe_cluster(request_timeout=30).result(timeout=60)
    assert [(n.id, n.rack) for n in cluster.nodes] == [(1, "rack-a")]
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=60)
    assert configs["min.insync.replicas"].value == "2"
    assert configs["unclean.leader.election.enable"].value == "false"


def test_the_health_checks_fail_when_nothing_answers(nodes):
    with socket.socket() as bound_not_listening:  # held for the check: nothing can answer on it
        bound_not_listening.bind((LOOPBACK, 0))
        port = bound_not_listening.getsockname()[1]
        for name in ("controller-9001", "broker-1"):
            dead = nodes["checks"][name].replace(
                f"{LOOPBACK}:{nodes['ports'][name]['metrics']}", f"{LOOPBACK}:{port}"
            )
            assert subprocess.run(["sh", "-c", dead], capture_output=True).returncode != 0, name
