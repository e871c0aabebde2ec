"""docker-compose.yaml cannot run here (no Docker engine): check everything that can be
checked without one, deriving what "right" means from the project itself (the local
stack's topology and properties, the connection ids the DAGs use, the pinned versions)
rather than from a second copy of it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from kafka_runbooks import storage
from kafka_runbooks.probes import probe_from_config
from kafka_runbooks.restart.backends import backend_from_config
from kafka_runbooks.restart.docker import DockerBackend
from kafka_runbooks_airflow.data_store import options_from_connection
from kafka_runbooks_dev.localstack import s3proxy as local_s3proxy
from kafka_runbooks_dev.localstack.stack import LocalStack
from kafka_runbooks_dev.localstack.topology import BROKER, CONNECT, CONTROLLER, Topology

ROOT = Path(__file__).resolve().parents[2]
PINNED_TAG = re.compile(r"^[^:@\s]+:(?!latest$)[^:\s]*\d[^:\s]*$")
DOCKER_SOCKET = "/var/run/docker.sock"  # the Docker restart back end's
HOST_PATHS_ALLOWED = {DOCKER_SOCKET}
# Airflow's own volumes, shared by its components as in Airflow's compose file (the
# generated config with its JWT secret, task logs); nothing of the runbooks' is shared.
AIRFLOW_OWN_VOLUMES = {"airflow-config": "/opt/airflow/config", "airflow-logs": "/opt/airflow/logs"}
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
S3PROXY_LAUNCHER = ROOT / "docker" / "s3proxy" / "s3proxy.sh"


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


def _airflow_services() -> dict[str, dict]:
    """The Airflow components (the one-shot init included): every one runs the project."""
    return {n: s for n, s in _services().items() if n.startswith("airflow-")}


def _command(service: dict) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else list(command)


def _task_runners() -> dict[str, dict]:
    """The services that run tasks: Celery workers (`airflow celery worker`)."""
    return {n: s for n, s in _airflow_services().items() if _command(s)[:2] == ["celery", "worker"]}


def _named_volumes(service: dict) -> dict[str, str]:
    """Named volume -> mount target (bind mounts and host paths left out)."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = (
            (volume["source"], volume["target"]) if isinstance(volume, dict) else volume.split(":")[:2]
        )
        if not source.startswith((".", "/")):
            out[source] = target
    return out


def _pom_dependencies(pom: Path) -> dict[tuple[str, str], str]:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    return {
        (d.find("m:groupId", ns).text, d.find("m:artifactId", ns).text): d.find("m:version", ns).text
        for d in ET.parse(pom).getroot().findall("m:dependencies/m:dependency", ns)
    }


def _store_env(service: dict) -> dict[str, str]:
    """What kafka_runbooks.storage reads of a service's environment."""
    return {k: v for k, v in _env(service).items() if k.startswith(("KAFKA_RUNBOOKS_DATA", "AWS_"))}


def _store_credentials(env: dict[str, str]) -> tuple[str | None, str | None]:
    """The key pair a component signs with: its data connection's, else its AWS_* ones."""
    conn_id = env.get(storage.CONN_ENV)
    if conn_id:
        conn = json.loads(env[f"AIRFLOW_CONN_{conn_id.upper()}"])
        options = options_from_connection("s3", conn.get("login"), conn.get("password"), conn.get("extra"))
        return options.get("key"), options.get("secret")
    return env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")


def _s3proxy_config(env: dict[str, str]) -> dict[str, str]:
    """What docker/s3proxy/s3proxy.sh gives S3Proxy as its properties, from its environment."""
    out = subprocess.run(
        ["bash", str(S3PROXY_LAUNCHER), "--render"],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line)


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
    # the image's base is its last FROM (a jars stage may come first: tests/unit/test_docker_images.py)
    assert (
        _from_images(_dockerfile(services["airflow-scheduler"]))[-1] == f"apache/airflow:{airflow}-python3.11"
    )
    assert services["airflow-scheduler"]["image"].endswith(f":{airflow}-python3.11")
    assert _from_images(_dockerfile(services["broker-1"]))[-1] == f"apache/kafka:{kafka}"
    for name in _kafka_nodes() | {"connect": services["connect"]}:
        assert services[name]["image"].split(":")[1].startswith(kafka), name
    # The Spark image installs requirements.txt's own pyspark pin, and says which it is.
    assert "grep -E '^pyspark==' /tmp/requirements.txt" in _dockerfile(services["spark-worker"]).read_text()
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"].split(":")[1].startswith(pyspark), name
    plugin_path = _read_properties(ROOT / "stack" / "docker" / "connect.properties")["plugin.path"]
    assert plugin_path == f"/opt/kafka/libs/connect-file-{kafka}.jar"
    # S3Proxy: the local stack's pin (the jar it carries: tests/unit/test_docker_images.py)
    s3proxy = _pom_dependencies(ROOT / "stack" / "s3proxy" / "pom.xml")[("org.gaul", "s3proxy")]
    assert services["s3proxy"]["image"].split(":")[1] == s3proxy


def test_spark_workers_run_the_drivers_python():
    """PySpark refuses workers whose Python major.minor differs from the driver's."""
    services = _services()
    airflow_base = _from_images(_dockerfile(services["airflow-scheduler"]))[-1]  # the last FROM: the image's
    spark_base = _from_images(_dockerfile(services["spark-worker"]))[-1]
    driver = re.search(r"-python(\d+\.\d+)$", airflow_base).group(1)
    worker = re.match(r"python:(\d+\.\d+)\.\d+-", spark_base).group(1)
    assert driver == worker
    assert services["spark-master"]["build"] == services["spark-worker"]["build"]


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


def test_s3proxy_runs_the_launcher_the_image_carries_with_the_local_stacks_settings(monkeypatch, tmp_path):
    """Same S3Proxy settings as the local stack's, but for addresses, secrets and paths."""
    service = _services()["s3proxy"]
    dockerfile = _dockerfile(service).read_text()
    target = re.search(r"COPY --chmod=755 docker/s3proxy/s3proxy.sh (\S+)", dockerfile).group(1)
    assert _command(service) == [target]
    compose = _s3proxy_config(_env(service))

    # The local stack writes its configuration just before it starts the process: stop there.
    class Started(Exception):
        pass

    def popen(*args, **kwargs):
        raise Started

    monkeypatch.setattr(local_s3proxy, "ensure_jars", lambda lib_dir: lib_dir)
    monkeypatch.setattr(local_s3proxy.subprocess, "Popen", popen)
    proxy = local_s3proxy.S3Proxy(home=tmp_path, port=1)
    with pytest.raises(Started):
        proxy.start()
    monkeypatch.undo()
    local = _read_properties(tmp_path / "s3proxy.conf")
    per_deployment = {
        "s3proxy.endpoint",
        "s3proxy.identity",
        "s3proxy.credential",
        "jclouds.filesystem.basedir",
    }
    assert set(compose) == set(local)
    assert {k: v for k, v in compose.items() if k not in per_deployment} == {
        k: v for k, v in local.items() if k not in per_deployment
    }
    # The objects are kept where the service's volume is mounted.
    assert compose["jclouds.filesystem.basedir"] in _named_volumes(service).values()


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
                # Root-equivalent: only where the restart back end runs, the task runners.
                assert source != DOCKER_SOCKET or name in _task_runners(), f"{name} mounts the Docker socket"
            else:
                assert source in declared, f"{name} uses volume {source!r}, not declared"


def test_no_volume_holds_runbook_state_and_none_is_shared_but_airflows_own():
    """Tasks land on any worker: what one writes, the next must find without a shared disk."""
    services = _services()
    mounted_by: dict[str, set[str]] = {}
    for name, service in services.items():
        assert storage.DATA_DIR_ENV not in _env(service), f"{name} keeps runbook data in a local folder"
        for volume, target in _named_volumes(service).items():
            mounted_by.setdefault(volume, set()).add(name)
            if volume in AIRFLOW_OWN_VOLUMES:
                assert target == AIRFLOW_OWN_VOLUMES[volume], f"{name} mounts {volume} at {target}"
    for volume, names in mounted_by.items():
        if volume in AIRFLOW_OWN_VOLUMES:
            assert all(n.startswith("airflow-") for n in names), f"{volume} mounted by {sorted(names)}"
        else:
            assert len(names) == 1, f"{volume} is shared by {sorted(names)}"
    # What runs tasks or Spark executors mounts nothing but Airflow's own volumes.
    for name in [*_task_runners(), "spark-worker"]:
        extra = set(_named_volumes(services[name])) - set(AIRFLOW_OWN_VOLUMES)
        assert not extra, f"{name} mounts {sorted(extra)}"


# ------------------------------------------------------------------ the data store
def test_every_airflow_component_keeps_runbook_data_in_the_s3proxy_bucket():
    services = _services()
    proxy = _env(services["s3proxy"])
    config = _s3proxy_config(proxy)
    port = urlsplit(config["s3proxy.endpoint"]).port
    assert port == int(proxy["S3PROXY_PORT"])
    for name, service in _airflow_services().items():
        env = _store_env(service)
        url = env.get(storage.DATA_URL_ENV, "")
        assert storage.protocol_of(url) == "s3", f"{name}: {storage.DATA_URL_ENV}={url!r} is not an S3 URL"
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        assert bucket == proxy["S3PROXY_BUCKET"], f"{name} writes to bucket {bucket}, S3Proxy makes another"
        client = json.loads(env.get(storage.OPTIONS_ENV, "{}")).get("client_kwargs") or {}
        endpoint = urlsplit(client.get("endpoint_url", ""))
        assert endpoint.hostname in ("s3proxy", services["s3proxy"].get("hostname")), name
        assert endpoint.port == port, f"{name} calls S3Proxy on {endpoint.port}, it listens on {port}"
        key, secret = _store_credentials(_env(service))
        assert (key, secret) == (config["s3proxy.identity"], config["s3proxy.credential"]), name
    # All of them the same store: a report one writes is the one the Kafka page reads.
    assert len({json.dumps(_store_env(s), sort_keys=True) for s in _airflow_services().values()}) == 1


def test_spark_reads_and_writes_the_same_store_over_s3a(monkeypatch):
    env = _store_env(_services()["airflow-worker"])
    for key in (storage.DATA_URL_ENV, storage.OPTIONS_ENV, storage.CONN_ENV):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    conf = storage.spark_conf()
    endpoint = json.loads(env[storage.OPTIONS_ENV])["client_kwargs"]["endpoint_url"]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == endpoint
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    # S3A takes no key from the conf (it would be on a command line): the executors sign
    # with the pair in their own environment, which must be the one S3Proxy checks.
    config = _s3proxy_config(_env(_services()["s3proxy"]))
    worker = _env(_services()["spark-worker"])
    assert (worker.get("AWS_ACCESS_KEY_ID"), worker.get("AWS_SECRET_ACCESS_KEY")) == (
        config["s3proxy.identity"],
        config["s3proxy.credential"],
    )
    assert config["s3proxy.credential"] not in json.dumps(conf)


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
    for name in _task_runners():
        assert "airflow-init" in services[name]["depends_on"], name


def test_airflow_waits_for_the_broker_and_the_store_and_their_health_checks_are_real():
    services = _services()
    broker = urlsplit(_airflow_env()["AIRFLOW__CELERY__BROKER_URL"]).hostname
    for name, service in _airflow_services().items():
        if name in _one_shots():
            continue
        depends = service.get("depends_on") or {}
        for dep in (broker, "s3proxy", "postgres"):
            assert depends.get(dep) == {"condition": "service_healthy"}, f"{name} does not wait for {dep}"
    # Tasks call the Execution API: the workers start once the API server answers.
    for name, service in _task_runners().items():
        assert service["depends_on"].get("airflow-apiserver") == {"condition": "service_healthy"}, name
    assert services[broker]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    # S3Proxy's own health endpoint, on the port it listens on.
    check = " ".join(services["s3proxy"]["healthcheck"]["test"])
    port = _env(services["s3proxy"])["S3PROXY_PORT"]
    assert f"http://localhost:{port}/healthz" in check and "'OK'" in check


# ------------------------------------------------------------------ connections
def _string_or_strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.List | ast.Tuple):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


CONN_ID_NAMES = ("conn_id", "conn_ids", "config_id", "config_ids")


def _conn_ids_in(tree: ast.AST) -> set[str]:
    """Defaults of *_conn_id(s) / *_config_id(s) Params and arguments, conn_id= literals, default_conn_name."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (
                    isinstance(key, ast.Constant)
                    and str(key.value).endswith(CONN_ID_NAMES)
                    and isinstance(value, ast.Call)
                    and getattr(value.func, "id", getattr(value.func, "attr", "")) == "Param"
                    and value.args
                ):
                    found.update(_string_or_strings(value.args[0]))
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and kw.arg.endswith(CONN_ID_NAMES):
                    found.update(_string_or_strings(kw.value))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
            for arg, default in zip(args, defaults):
                if default is not None and arg.arg.endswith(CONN_ID_NAMES):
                    found.update(_string_or_strings(default))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "default_conn_name" for t in node.targets
        ):
            found.update(_string_or_strings(node.value))
    return {c for c in found if c and "{{" not in c}


def _conn_ids_the_code_uses() -> set[str]:
    from kafka_runbooks_airflow.inputs import kafka_config_param

    ids: set[str] = set()
    for folder in ("dags", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            ids |= _conn_ids_in(ast.parse(path.read_text(), str(path)))
    # the forms' Kafka connection comes from one builder, its default a constant of the fleet
    return ids | {kafka_config_param().value}


def test_the_scan_finds_connection_ids_in_every_form_it_claims():
    code = """
with DAG(params={"kafka_config_id": Param("a_default"), "connect_conn_ids": Param(["b_default"])}):
    SparkSubmitOperator(conn_id="c_default", kafka_config_id="{{ params.kafka_config_id }}")
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
    # The restarts run in tasks, so in the workers.
    socket_path = backend.docker_host[len("unix://") :]
    assert _task_runners()
    for name, worker in _task_runners().items():
        assert any(v.split(":")[1] == socket_path for v in worker["volumes"]), f"{name}: no Docker socket"


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


def test_the_spark_driver_runs_where_tasks_run_and_names_itself_so_executors_reach_it():
    """Client mode: the driver is the task's process; executors call it back by name."""
    named = {n for n, s in _services().items() if "SPARK_LOCAL_HOSTNAME" in _env(s)}
    assert named == set(_task_runners())
    for name, service in _task_runners().items():
        assert _env(service)["SPARK_LOCAL_HOSTNAME"] in (name, service.get("hostname")), name


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
    settings = {
        k for service in _airflow_services().values() for k in _env(service) if k.startswith("AIRFLOW__")
    }
    assert {"AIRFLOW__CELERY__BROKER_URL", "AIRFLOW__CELERY__RESULT_BACKEND"} <= settings
    for name in settings:
        section, key = name[len("AIRFLOW__") :].lower().split("__", 1)
        assert key in described.get(section, {}).get("options", {}), f"{name} is not an Airflow option"
    module, _, cls = env["AIRFLOW__CORE__AUTH_MANAGER"].rpartition(".")
    assert hasattr(importlib.import_module(module), cls)
    for user in env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(","):
        _, role = user.split(":")
        assert role.upper() in SimpleAuthManagerRole.__members__, user


# ------------------------------------------------------------------ the Celery executor
def test_celery_executor_with_redis_as_broker_and_postgres_as_result_backend():
    services = _services()
    for name, service in _airflow_services().items():
        assert _env(service)["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
    env = _airflow_env()
    broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
    assert broker.scheme == "redis" and broker.port == 6379
    assert services[broker.hostname]["image"].startswith("redis:")
    assert str(broker.port) in [str(p) for p in services[broker.hostname].get("expose", [])]
    # The result backend is the metadata DB (as in Airflow's compose file): same server,
    # database and user as SQL_ALCHEMY_CONN and the postgres service.
    backend = env["AIRFLOW__CELERY__RESULT_BACKEND"]
    assert backend.startswith("db+postgresql")
    metadata = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    result = urlsplit(backend[len("db+") :])
    assert (result.hostname, result.path, result.username, result.password) == (
        metadata.hostname,
        metadata.path,
        metadata.username,
        metadata.password,
    )
    postgres = _env(services[result.hostname])
    assert (result.path.lstrip("/"), result.username) == (postgres["POSTGRES_DB"], postgres["POSTGRES_USER"])


def test_a_celery_worker_runs_the_tasks_and_its_health_check_pings_itself():
    workers = _task_runners()
    assert workers, "no service runs `airflow celery worker`"
    scheduler = _services()["airflow-scheduler"]
    for name, worker in workers.items():
        assert worker["image"] == scheduler["image"] and worker["build"] == scheduler["build"], name
        check = " ".join(worker["healthcheck"]["test"])
        # The worker's own node name (Celery names it celery@<host name>), as the shell sees it.
        assert check.startswith("CMD-SHELL ") and 'inspect ping -d "celery@${HOSTNAME}"' in check, check
        # Airflow's compose file: the stop signal reaches the Celery worker (warm shutdown).
        assert _env(worker)["DUMB_INIT_SETSID"] == "0", name


def test_the_scheduler_loads_the_celery_executor_with_the_compose_settings(tmp_path):
    """Loads the executor class and its Celery app as airflow-scheduler would, and the app
    the worker's health check names: the pins of celery and its provider must agree."""
    env = _airflow_env()
    [worker] = _task_runners().values()
    app = re.search(r"celery --app (\S+) inspect ping", " ".join(worker["healthcheck"]["test"])).group(1)
    module, _, attribute = app.rpartition(".")
    code = f"""
import json
from airflow.executors.executor_loader import ExecutorLoader
cls, _ = ExecutorLoader.import_default_executor_cls()
import importlib
app = getattr(importlib.import_module({module!r}), {attribute!r})
print(json.dumps([cls.__name__, app.conf.broker_url, app.conf.result_backend]))
"""
    settings = {
        k: v for k, v in env.items() if k.startswith(("AIRFLOW__CORE__EXECUTOR", "AIRFLOW__CELERY__"))
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "AIRFLOW_HOME": str(tmp_path),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            **settings,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    name, broker, backend = json.loads(out.stdout.strip().splitlines()[-1])
    assert name == "CeleryExecutor"
    assert (broker, backend) == (env["AIRFLOW__CELERY__BROKER_URL"], env["AIRFLOW__CELERY__RESULT_BACKEND"])


def test_the_connect_connection_names_the_workers_own_status_topic():
    """A restart reads what the workers wrote to their status topic (kafka_connect_restart): the
    connection's ``status_topic`` must be the workers' ``status.storage.topic``."""
    props = dict(
        line.split("=", 1)
        for line in (ROOT / "stack/docker/connect.properties").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert _conn_extra("kafka_connect_default")["status_topic"] == props["status.storage.topic"]
