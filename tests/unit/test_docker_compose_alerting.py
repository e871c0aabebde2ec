"""docker-compose.yaml's Prometheus and Alertmanager (issue #41), checked without a Docker engine:
the scrape targets are every Kafka node's and Connect's exporter with the labels the local stack's
Prometheus gives (one function makes both), both configs pass their own tools' checks
(``promtool check config``, ``amtool check-config``: Debian's, as scripts/bootstrap.sh installs),
and Alertmanager posts to the plugin's receiver on the API server with the token the API server
reads."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import yaml

from kafka_runbooks_airflow.alert_app import TOKEN_ENV, URL_PREFIX, app
from kafka_runbooks_dev.localstack.topology import Topology
from kafka_runbooks_dev.prometheus import scrape_targets
from tests.unit.test_docker_compose import JMX_AGENT, ROOT, _env, _kafka_nodes, _services, load_compose
from tests.unit.test_prometheus_rules import promtool

COMPOSE = ROOT / "stack" / "compose"


def _mounts(service: dict) -> dict[str, Path]:
    """A service's bind mounts: path in the container -> file in the repository."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = ROOT / source
    return found


def _amtool() -> str:
    """amtool's path: Debian's prometheus-alertmanager package's (scripts/bootstrap.sh installs it)."""
    tool = shutil.which("amtool")
    assert tool, "amtool is not installed: scripts/bootstrap.sh --browser installs prometheus-alertmanager"
    return tool


def _prometheus_config() -> dict:
    return yaml.safe_load((COMPOSE / "prometheus.yml").read_text())


def test_prometheus_scrapes_every_nodes_exporter_with_the_local_stacks_labels():
    exporters = {}
    for name, service in {**_kafka_nodes(), "connect": _services()["connect"]}.items():
        port = JMX_AGENT.search(_env(service)["KAFKA_OPTS"]).group("port")
        exporters[name] = f"{service['hostname']}:{port}"
    want = scrape_targets(Topology(), address=lambda node: exporters[node.name])
    [job] = _prometheus_config()["scrape_configs"]
    assert job["static_configs"] == want and len(want) == len(exporters)


def test_prometheus_loads_the_projects_rules_and_alerts_the_compose_alertmanager(tmp_path):
    service = _services()["prometheus"]
    mounts = _mounts(service)
    flags = dict(arg.split("=", 1) for arg in service["command"])
    config_path = Path(flags["--config.file"])
    assert mounts[str(config_path)] == COMPOSE / "prometheus.yml"
    config = _prometheus_config()
    # rule files resolve beside the config, where the project's rules are mounted
    for rule in config["rule_files"]:
        assert mounts[str(config_path.parent / rule)] == ROOT / "stack" / "prometheus" / "kafka-alerts.yml"
        shutil.copy(mounts[str(config_path.parent / rule)], tmp_path / rule)
    shutil.copy(COMPOSE / "prometheus.yml", tmp_path / "prometheus.yml")
    assert "SUCCESS" in promtool("check", "config", str(tmp_path / "prometheus.yml"))
    [manager] = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    host, port = manager.split(":")
    assert _services()[host]["hostname"] == host and f"localhost:{port}/" in " ".join(
        _services()[host]["healthcheck"]["test"]
    )


def test_alertmanager_posts_every_alert_to_the_receiver_with_the_api_servers_token():
    service = _services()["alertmanager"]
    script = service["command"][0]
    config_path = next(a.split("=", 1)[1] for a in shlex.split(script) if a.startswith("--config.file="))
    config = yaml.safe_load(_mounts(service)[config_path].read_text())
    assert _services()["alertmanager"]["entrypoint"] == ["/bin/sh", "-c"]
    checked = subprocess.run(
        [_amtool(), "check-config", str(_mounts(service)[config_path])], capture_output=True, text=True
    )
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked
    # one group per alert: the intake starts one run per incident, not one per group
    assert config["route"]["group_by"] == ["..."]
    [receiver] = [r for r in config["receivers"] if r["name"] == config["route"]["receiver"]]
    [webhook] = receiver["webhook_configs"]
    routes = {route.path for route in app.routes}
    assert webhook["url"] == f"http://airflow-apiserver:8080{URL_PREFIX}/alertmanager"
    assert "/alertmanager" in routes and "8080:8080" in _services()["airflow-apiserver"]["ports"]
    assert webhook["send_resolved"] is True
    auth = webhook["http_config"]["authorization"]
    assert auth["type"] == "Bearer"
    # the file the service writes at start, from the variable the API server reads too
    assert f'printf %s "${TOKEN_ENV}" > {auth["credentials_file"]}' in script
    assert script.startswith("umask 077 && ")
    set_in_env_file = load_compose({TOKEN_ENV: "from-dot-env"})["services"]
    assert _env(set_in_env_file["alertmanager"])[TOKEN_ENV] == "from-dot-env"
    assert _env(set_in_env_file["airflow-apiserver"])[TOKEN_ENV] == "from-dot-env"
    assert _env(service)[TOKEN_ENV] == ""  # unset: the receiver refuses every post (503)
