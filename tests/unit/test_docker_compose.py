"""docker-compose.yaml cannot run here (no Docker engine): check everything that can be
checked without one, deriving what "right" means from the project itself (the local
stack's topology and properties, the connection ids the DAGs use, the pinned versions)
rather than from a second copy of it."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
import yaml

from kafka_runbooks.probes import probe_from_config
from kafka_runbooks.restart.backends import backend_from_config
from kafka_runbooks.restart.docker import DockerBackend
from kafka_runbooks_dev.localstack.stack import LocalStack, ensure_jars
from kafka_runbooks_dev.localstack.topology import BROKER, CONNECT, CONTROLLER, Topology

ROOT = Path(__file__).resolve().parents[2]
PINNED_TAG = re.compile(r"^[^:@\s]+:(?!latest$)[^:\s]*\d[^:\s]*$")
HOST_PATHS_ALLOWED = {"/var/run/docker.sock"}  # the Docker restart back end's socket
JMX_AGENT = re.compile(r"-javaagent:(?P<jar>[^=\s]+)=(?P<port>\d+):(?P<config>\S+)")
# Properties that name addresses or paths: compared by shape, not by value.
ADDRESS_KEYS = {
    "controller.quorum.voters",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "log.dirs",
    "bootstrap.servers",
    "rest.advertised.host.name",
    "rest.advertised.port",
    "plugin.path",
}
LAUNCHER = ROOT / "docker" / "kafka" / "kafka-node.sh"


_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<named>[A-Za-z_]\w*))"
)


def interpolate(value, environ: dict[str, str], unset: list[str] | None = None):
    """Compose's variable substitution: $$, ${VAR}, $VAR, ${VAR:-default}, ${VAR-default}."""
    if isinstance(value, dict):
        return {k: interpolate(v, environ, unset) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ, unset) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["named"]
        current = environ.get(name)
        if m["op"] == ":-":
            return current or m["arg"]
        if m["op"] == "-":
            return m["arg"] if current is None else current
        if current is None and unset is not None:
            unset.append(name)
        return current or ""

    return _VARIABLE.sub(substitute, value)


def load_compose(environ: dict[str, str] | None = None, unset: list[str] | None = None) -> dict:
    """docker-compose.yaml as `docker compose config` sees it, by default with no .env."""
    return interpolate(yaml.safe_load((ROOT / "docker-compose.yaml").read_text()), environ or {}, unset)


@cache
def _compose() -> dict:
    return load_compose()


def test_every_variable_has_a_default():
    unset: list[str] = []
    load_compose({}, unset)
    assert unset == []
    assert load_compose({"KAFKA_CLUSTER_ID": "x"})["services"]["broker-1"]["environment"]["CLUSTER_ID"] == "x"


def _services() -> dict[str, dict]:
    return _compose()["services"]


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _airflow_env() -> dict[str, str]:
    return _env(_services()["airflow-scheduler"])


def _properties_from_env(env: dict[str, str]) -> dict[str, str]:
    """What the node launcher (docker/kafka/kafka-node.sh) writes as server.properties."""
    out = subprocess.run(
        ["bash", str(LAUNCHER), "--render"],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line)


def _read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _dockerfile(service: dict) -> Path:
    build = service["build"]
    build = {"context": build} if isinstance(build, str) else build
    return ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")


def _from_images(dockerfile: Path) -> list[str]:
    return [
        line.split()[1]
        for line in dockerfile.read_text().splitlines()
        if line.strip().upper().startswith("FROM ")
    ]


def _requirement(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in requirements.txt")


def _pom_property(name: str) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    value = ET.parse(ROOT / "stack" / "pom.xml").getroot().find(f"m:properties/m:{name}", ns)
    assert value is not None, name
    return value.text.strip()


def _kafka_nodes() -> dict[str, dict]:
    return {n: s for n, s in _services().items() if "KAFKA_PROCESS_ROLES" in _env(s)}


def _one_shots() -> set[str]:
    return {
        dep
        for service in _services().values()
        for dep, cond in (service.get("depends_on") or {}).items()
        if isinstance(cond, dict) and cond.get("condition") == "service_completed_successfully"
    }


# ------------------------------------------------------------------ images and builds
def test_every_service_has_a_pinned_image_or_a_build_from_pinned_images():
    for name, service in _services().items():
        image = service.get("image", "")
        assert PINNED_TAG.match(image), f"{name}: image {image!r} has no version tag"
        if "build" in service:
            dockerfile = _dockerfile(service)
            assert dockerfile.is_file(), f"{name} builds from {dockerfile}, which is not in the repo"
            froms = _from_images(dockerfile)
            assert froms, f"{dockerfile} has no FROM"
            for base in froms:
                assert PINNED_TAG.match(base), f"{dockerfile}: FROM {base} is not pinned to a version"


def test_built_images_carry_the_versions_the_project_pins():
    services = _services()
    airflow = _requirement("apache-airflow")
    pyspark = _requirement("pyspark")
    kafka = _pom_property("kafka.version")
    assert _from_images(_dockerfile(services["airflow-scheduler"])) == [
        f"apache/airflow:{airflow}-python3.11"
    ]
    assert services["airflow-scheduler"]["image"].endswith(f":{airflow}-python3.11")
    assert _from_images(_dockerfile(services["broker-1"])) == [f"apache/kafka:{kafka}"]
    for name in _kafka_nodes() | {"connect": services["connect"]}:
        assert services[name]["image"].split(":")[1].startswith(kafka), name
    # The Spark image installs requirements.txt's own pyspark pin, and says which it is.
    assert "grep -E '^pyspark==' /tmp/requirements.txt" in _dockerfile(services["spark-worker"]).read_text()
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"].split(":")[1].startswith(pyspark), name
    plugin_path = _read_properties(ROOT / "stack" / "docker" / "connect.properties")["plugin.path"]
    assert plugin_path == f"/opt/kafka/libs/connect-file-{kafka}.jar"


def test_spark_workers_run_the_drivers_python():
    """PySpark refuses workers whose Python major.minor differs from the driver's."""
    services = _services()
    [airflow_base] = _from_images(_dockerfile(services["airflow-scheduler"]))
    [spark_base] = _from_images(_dockerfile(services["spark-worker"]))
    driver = re.search(r"-python(\d+\.\d+)$", airflow_base).group(1)
    worker = re.match(r"python:(\d+\.\d+)\.\d+-", spark_base).group(1)
    assert driver == worker
    assert services["spark-master"]["build"] == services["spark-worker"]["build"]


def test_the_jmx_exporter_agent_is_maven_centrals_pinned_jar():
    """The Kafka image ADDs the agent by checksum: the checksum is the local stack's jar's."""
    version = _pom_property("jmx.exporter.version")
    text = _dockerfile(_services()["broker-1"]).read_text()
    url = re.search(r"https://repo1\.maven\.org/\S+\.jar", text).group(0)
    assert url.endswith(f"/{version}/jmx_prometheus_javaagent-{version}.jar")
    checksum = re.search(r"--checksum=sha256:([0-9a-f]{64})", text).group(1)
    jar = ensure_jars() / f"jmx_prometheus_javaagent-{version}.jar"
    assert hashlib.sha256(jar.read_bytes()).hexdigest() == checksum


def test_every_kafka_node_runs_the_launcher_the_image_carries():
    dockerfile = _dockerfile(_services()["broker-1"]).read_text()
    target = re.search(r"COPY --chmod=755 docker/kafka/kafka-node.sh (\S+)", dockerfile).group(1)
    for name, service in _kafka_nodes().items():
        assert service["command"] == [target], name
    # Launcher variables are not properties; everything else named KAFKA_* is, "_" -> ".".
    rendered = _properties_from_env(
        {
            "KAFKA_OPTS": "-javaagent:x",
            "KAFKA_HEAP_OPTS": "-Xmx1g",
            "KAFKA_NUM_PARTITIONS": "3",
            "CLUSTER_ID": "c",
        }
    )
    assert rendered == {"num.partitions": "3"}


# ------------------------------------------------------------------ mounts and volumes
def test_every_bind_mounted_file_exists_and_every_named_volume_is_declared():
    declared = set((_compose().get("volumes") or {}).keys())
    for name, service in _services().items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is not in the repo"
            elif source.startswith("/"):
                assert source in HOST_PATHS_ALLOWED, f"{name} mounts host path {source}"
            else:
                assert source in declared, f"{name} uses volume {source!r}, not declared"


def test_the_spark_executors_see_the_snapshots_where_airflow_writes_them():
    data_dir = _airflow_env()["KAFKA_RUNBOOKS_DATA_DIR"]
    for name in ("airflow-scheduler", "spark-worker"):
        targets = {v.split(":")[1] for v in _services()[name]["volumes"] if not v.startswith(".")}
        assert data_dir in targets, f"{name} does not mount the snapshot folder {data_dir}"


# ------------------------------------------------------------------ health and start order
def test_every_long_running_service_has_a_health_check_and_one_shots_run_once():
    services = _services()
    one_shots = _one_shots()
    assert one_shots, "no one-shot init service found"
    for name, service in services.items():
        if name in one_shots:
            assert str(service.get("restart", "no")) == "no", f"one-shot {name} must not restart"
            continue
        test = (service.get("healthcheck") or {}).get("test")
        assert test and test != ["NONE"], f"{name} has no health check"


def test_dependents_wait_for_health_or_for_completion():
    services = _services()
    one_shots = _one_shots()
    for name, service in services.items():
        for dep, cond in (service.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert isinstance(cond, dict), f"{name} -> {dep}: give a condition"
            want = "service_completed_successfully" if dep in one_shots else "service_healthy"
            assert cond["condition"] == want, f"{name} -> {dep}: {cond['condition']} (want {want})"
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert "airflow-init" in services[name]["depends_on"], name


# ------------------------------------------------------------------ connections
def _string_or_strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.List | ast.Tuple):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _conn_ids_in(tree: ast.AST) -> set[str]:
    """Defaults of *_conn_id(s) Params and arguments, conn_id= literals, default_conn_name."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (
                    isinstance(key, ast.Constant)
                    and str(key.value).endswith(("conn_id", "conn_ids"))
                    and isinstance(value, ast.Call)
                    and getattr(value.func, "id", getattr(value.func, "attr", "")) == "Param"
                    and value.args
                ):
                    found.update(_string_or_strings(value.args[0]))
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and kw.arg.endswith(("conn_id", "conn_ids")):
                    found.update(_string_or_strings(kw.value))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
            for arg, default in zip(args, defaults):
                if default is not None and arg.arg.endswith(("conn_id", "conn_ids")):
                    found.update(_string_or_strings(default))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "default_conn_name" for t in node.targets
        ):
            found.update(_string_or_strings(node.value))
    return {c for c in found if c and "{{" not in c}


def _conn_ids_the_code_uses() -> set[str]:
    ids: set[str] = set()
    for folder in ("dags", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            ids |= _conn_ids_in(ast.parse(path.read_text(), str(path)))
    return ids


def test_the_scan_finds_connection_ids_in_every_form_it_claims():
    code = """
with DAG(params={"kafka_conn_id": Param("a_default"), "connect_conn_ids": Param(["b_default"])}):
    SparkSubmitOperator(conn_id="c_default", kafka_config_id="{{ params.kafka_conn_id }}")
class H:
    default_conn_name = "d_default"
    def __init__(self, probe_conn_id: str = "e_default", *, restart_conn_id="f_default"): ...
"""
    assert _conn_ids_in(ast.parse(code)) == {f"{c}_default" for c in "abcdef"}


def test_every_connection_id_the_dags_use_is_defined_in_the_environment():
    used = _conn_ids_the_code_uses()
    assert {"kafka_default", "spark_default", "kafka_connect_default"} <= used  # the scan works
    for name, service in _services().items():
        if name.startswith("airflow-"):
            env = _env(service)
            missing = sorted(c for c in used if f"AIRFLOW_CONN_{c.upper()}" not in env)
            assert not missing, f"{name} lacks connections {missing}"


def test_same_connection_ids_and_types_as_the_local_stack(tmp_path):
    local = LocalStack(home=tmp_path, topology=Topology()).airflow_connections()
    env = _airflow_env()
    for conn_id, conn in local.items():
        defined = json.loads(env[f"AIRFLOW_CONN_{conn_id.upper()}"])
        assert defined["conn_type"] == conn["conn_type"], conn_id


def _conn_extra(conn_id: str) -> dict:
    return json.loads(_airflow_env()[f"AIRFLOW_CONN_{conn_id.upper()}"]).get("extra") or {}


def _node_ids() -> dict[str, int]:
    return {name: int(_env(s)["KAFKA_NODE_ID"]) for name, s in _kafka_nodes().items()}


def test_kafka_connection_bootstraps_from_every_broker():
    servers = _conn_extra("kafka_default")["bootstrap.servers"].split(",")
    expected = []
    for service in _kafka_nodes().values():
        advertised = _env(service).get("KAFKA_ADVERTISED_LISTENERS", "")
        plaintext = [a for a in advertised.split(",") if a.startswith("PLAINTEXT://")]
        expected += [p[len("PLAINTEXT://") :] for p in plaintext]
    assert sorted(servers) == sorted(expected) and len(expected) == Topology().brokers


def test_probe_reads_every_nodes_exporter_on_its_metrics_port():
    probe = probe_from_config(_conn_extra("kafka_broker_probe_default"))
    for name, service in _kafka_nodes().items():
        node_id = int(_env(service)["KAFKA_NODE_ID"])
        port = JMX_AGENT.search(_env(service)["KAFKA_OPTS"]).group("port")
        assert probe.url(node_id) == f"http://{service['hostname']}:{port}/metrics", name


def test_restart_back_end_names_every_nodes_container():
    backend = backend_from_config(_conn_extra("kafka_restart_default"))
    assert isinstance(backend, DockerBackend)
    for name, node_id in _node_ids().items():
        assert backend.container(node_id) == _services()[name]["container_name"], name
    scheduler = _services()["airflow-scheduler"]
    socket_path = backend.docker_host[len("unix://") :]
    assert any(v.split(":")[1] == socket_path for v in scheduler["volumes"]), "the socket is not mounted"


def test_spark_default_resolves_to_the_compose_master(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", _airflow_env()["AIRFLOW_CONN_SPARK_DEFAULT"])
    resolved = SparkSubmitHook(conn_id="spark_default")._resolve_connection()
    assert resolved["master"] == "spark://spark-master:7077"
    assert resolved["deploy_mode"] == "client"
    master = _services()["spark-master"]["command"]
    assert (
        master[master.index("--host") + 1] == "spark-master" and master[master.index("--port") + 1] == "7077"
    )
    assert _services()["spark-worker"]["command"][-1] == resolved["master"]


# ------------------------------------------------------------------ Kafka = the local stack
@pytest.fixture(scope="module")
def local(tmp_path_factory):
    return LocalStack(home=tmp_path_factory.mktemp("stack"), topology=Topology())


def test_same_nodes_roles_ids_and_racks_as_the_local_stack(local):
    topo = local.topology
    by_id = {int(_env(s)["KAFKA_NODE_ID"]): (name, _env(s)) for name, s in _kafka_nodes().items()}
    expected = {n.node_id: n for n in topo.broker_nodes + topo.controller_nodes}
    assert sorted(by_id) == sorted(expected)
    for node_id, node in expected.items():
        name, env = by_id[node_id]
        assert name == node.name
        assert env["KAFKA_PROCESS_ROLES"] == node.role
        assert env.get("KAFKA_BROKER_RACK") == node.rack


def test_same_broker_and_controller_settings_as_the_local_stack(local):
    by_id = {int(_env(s)["KAFKA_NODE_ID"]): s for s in _kafka_nodes().values()}
    for node in local.topology.broker_nodes + local.topology.controller_nodes:
        want = local._properties(node)
        have = _properties_from_env(_env(by_id[node.node_id]))
        for key, value in want.items():
            if key in ADDRESS_KEYS:
                continue
            assert have.get(key) == value, f"{node.name}: {key}={have.get(key)!r}, local stack has {value!r}"
        # Addresses: same voters, same listener names and protocols (compose adds EXTERNAL).
        voters = {v.split("@")[0]: v.split("@")[1] for v in have["controller.quorum.voters"].split(",")}
        assert sorted(map(int, voters)) == [n.node_id for n in local.topology.controller_nodes]
        assert all(addr.startswith(f"controller-{vid}:") for vid, addr in voters.items())
        local_map = set(want["listener.security.protocol.map"].split(","))
        assert local_map <= set(have["listener.security.protocol.map"].split(","))
        listener_names = {lst.split("://")[0] for lst in have["listeners"].split(",")}
        assert {lst.split("://")[0] for lst in want["listeners"].split(",")} <= listener_names
    # KRaft controllers decide elections: unclean election is off there too.
    for s in _kafka_nodes().values():
        assert _properties_from_env(_env(s))["unclean.leader.election.enable"] == "false"


def test_connect_worker_settings_equal_the_local_stacks(local):
    want = local._properties(local.topology.connect_node)
    have = _read_properties(ROOT / "stack" / "docker" / "connect.properties")
    for key, value in want.items():
        if key not in ADDRESS_KEYS:
            assert have.get(key) == value, f"connect: {key}={have.get(key)!r}, local stack has {value!r}"
    brokers = [f"{n.name}:9092" for n in local.topology.broker_nodes]
    assert have["bootstrap.servers"].split(",") == brokers
    mounted = [v.split(":")[1] for v in _services()["connect"]["volumes"] if "connect.properties" in v]
    assert _services()["connect"]["command"][-1] in mounted


def test_every_node_and_connect_run_the_jmx_exporter_on_port_plus_200(local):
    config_mounts = {}
    for name, service in {**_kafka_nodes(), "connect": _services()["connect"]}.items():
        env = _env(service)
        agent = JMX_AGENT.search(env.get("KAFKA_OPTS", ""))
        assert agent, f"{name} runs no JMX exporter"
        mounts = dict(v.split(":")[1::-1] for v in service.get("volumes", []) if v.startswith("."))
        config_mounts[name] = mounts.get(agent.group("config"))
        if name == "connect":
            role, port = CONNECT, 8083
        else:
            role = env["KAFKA_PROCESS_ROLES"]
            port = int(re.search(r":(\d+)", env["KAFKA_LISTENERS"]).group(1))
        assert int(agent.group("port")) == port + 200, name
        assert role in (BROKER, CONTROLLER, CONNECT)
    assert set(config_mounts.values()) == {"./stack/jmx-exporter/kafka.yml"}, config_mounts
    # The same gap as the local stack's own ports (metrics_port - port).
    gaps = {n.metrics_port - n.port for n in local.topology.nodes}
    assert gaps == {200}


def test_health_checks_use_the_runbooks_definition_of_ready():
    for name, service in _kafka_nodes().items():
        check = " ".join(service["healthcheck"]["test"])
        port = JMX_AGENT.search(_env(service)["KAFKA_OPTS"]).group("port")
        assert f"localhost:{port}/metrics" in check, name
        metric = (
            "kafka_server_brokerstate" if _env(service)["KAFKA_PROCESS_ROLES"] == BROKER else "current_leader"
        )
        assert metric in check, name


# ------------------------------------------------------------------ Airflow settings
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_every_airflow_setting_names_a_real_option_with_a_usable_value():
    """Airflow ignores a misspelt AIRFLOW__SECTION__KEY silently: check each one exists."""
    import importlib

    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManagerRole
    from airflow.configuration import conf

    described = conf.configuration_description
    env = _airflow_env()
    settings = [k for k in env if k.startswith("AIRFLOW__")]
    assert settings
    for name in settings:
        section, key = name[len("AIRFLOW__") :].lower().split("__", 1)
        assert key in described.get(section, {}).get("options", {}), f"{name} is not an Airflow option"
    module, _, cls = env["AIRFLOW__CORE__AUTH_MANAGER"].rpartition(".")
    assert hasattr(importlib.import_module(module), cls)
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    for user in env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(","):
        _, role = user.split(":")
        assert role.upper() in SimpleAuthManagerRole.__members__, user
