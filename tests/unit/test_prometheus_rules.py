"""The Prometheus alert rules (stack/prometheus/kafka-alerts.yml): valid, each one's promtool unit
test passing on Prometheus's own rule engine, and their names exactly the alert intake's routes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from kafka_runbooks.alerts import ROUTES

RULES = Path(__file__).resolve().parents[2] / "stack" / "prometheus"


def promtool(*args: str) -> str:
    """promtool's output; it is Debian's ``prometheus`` package's (scripts/bootstrap.sh installs it)."""
    tool = shutil.which("promtool")
    assert tool, "promtool is not installed: scripts/bootstrap.sh --browser installs Debian's prometheus"
    done = subprocess.run([tool, *args], cwd=RULES, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_are_valid_and_their_unit_tests_pass():
    assert "SUCCESS: 8 rules found" in promtool("check", "rules", "kafka-alerts.yml")
    assert "SUCCESS" in promtool("test", "rules", "kafka-alerts.test.yml")


def test_every_rule_is_a_route_of_the_intake_and_every_route_a_rule():
    names = set(re.findall(r"^\s+- alert: (\w+)$", (RULES / "kafka-alerts.yml").read_text(), flags=re.M))
    assert names == {r.alertname for r in ROUTES}


def test_the_local_prometheus_config_is_valid_and_labels_every_node_as_the_rules_read(tmp_path):
    import json

    from kafka_runbooks_dev.localstack.topology import Topology
    from kafka_runbooks_dev.prometheus import Prometheus

    topology = Topology(port_base=21000)
    config = Prometheus(tmp_path, topology, "http://127.0.0.1:9093").config()
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))
    assert "is valid prometheus config file syntax" in promtool(
        "check", "config", str(tmp_path / "prometheus.yml")
    )
    targets = config["scrape_configs"][0]["static_configs"]
    assert len(targets) == len(topology.nodes)
    brokers = [t["labels"] for t in targets if t["labels"]["kafka_role"] == "broker"]
    assert sorted(b["broker_id"] for b in brokers) == ["1", "2", "3", "4"]
    assert all(t["labels"]["kafka_config_id"] == "kafka_default" for t in targets)
    [connect] = [t for t in targets if t["labels"]["kafka_role"] == "connect"]
    assert connect["labels"]["connect_conn_id"] == "kafka_connect_default"
    assert connect["targets"] == [f"127.0.0.1:{topology.connect_node.metrics_port}"]
    assert config["alerting"]["alertmanagers"][0]["static_configs"] == [{"targets": ["127.0.0.1:9093"]}]
