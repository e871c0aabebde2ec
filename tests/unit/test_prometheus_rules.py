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
