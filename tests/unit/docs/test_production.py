"""docs/production.md keeps up with the code: every DAG says what it never does, every
connection id and setting the code reads is documented, links resolve, and the example
connection extras are accepted by the real factories that will read them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import yaml

from kafka_runbooks.client_config import to_kafka_python
from kafka_runbooks.probes import PrometheusProbe, StrimziAgentProbe, probe_from_config
from kafka_runbooks.restart.backends import KubernetesBackend, backend_from_config
from tests.unit.test_docker_compose import _conn_ids_the_code_uses

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "production.md"


def _text() -> str:
    return DOC.read_text()


def _section(title: str) -> str:
    text = _text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 3)
    return text[start : end if end != -1 else None]


def _code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _text(), flags=re.S)


def _dag_ids() -> set[str]:
    ids = set()
    for path in (ROOT / "dags").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "dag_id"
                and isinstance(node.value, ast.Constant)
            ):
                ids.add(node.value.value)
    return ids


def test_every_runbook_says_what_it_never_does():
    table = _section("What each runbook will never do on its own")
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z_]+)` \| \S", table, flags=re.M)}
    dags = _dag_ids()
    assert len(dags) >= 5
    assert rows == dags


def test_every_connection_id_the_code_uses_is_documented():
    documented = set(re.findall(r"^### `([a-z_]+)`", _section("Connections"), flags=re.M))
    assert _conn_ids_the_code_uses() <= documented


def test_every_setting_the_code_reads_is_documented():
    used = set()
    for folder in ("dags", "plugins", "include"):
        for path in (ROOT / folder).rglob("*.py"):
            if "localstack" not in path.parts:
                used |= set(re.findall(r"KAFKA_RUNBOOKS_[A-Z_]+", path.read_text()))
    assert used, "the scan found no settings"
    text = _text()
    missing = sorted(v for v in used if v not in text and f"{v}<KEY>" not in text)
    assert not missing


def test_links_to_repository_files_resolve():
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", _text())
    assert links
    for link in links:
        assert (DOC.parent / link).exists(), link


def test_anchors_point_at_headings():
    text = _text()
    slugs = {
        re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    for anchor in re.findall(r"\]\(#([^)]+)\)", text):
        assert anchor in slugs, anchor


def test_example_connections_are_accepted_by_the_code_that_reads_them():
    blocks = [json.loads(b) for b in _code_blocks("json")]
    kafka = [b for b in blocks if "bootstrap.servers" in b]
    assert {b["security.protocol"] for b in kafka} == {"SASL_SSL", "SSL"}
    for config in kafka:
        translated = to_kafka_python(config)
        assert translated["security_protocol"] == config["security.protocol"]
        assert translated["ssl_cafile"] == config["ssl.ca.location"]
    [agent] = [b for b in blocks if b.get("kind") == "strimzi-agent"]
    probe = probe_from_config(agent)
    assert isinstance(probe, StrimziAgentProbe)
    assert probe.url(3).startswith("https://my-cluster-broker-3.") and probe.url(3).endswith(
        ":8443/v1/broker-state"
    )

    # The `airflow connections add` examples, their --conn-extra JSON.
    shell = "\n".join(_code_blocks("bash"))
    extras = [json.loads(m) for m in re.findall(r"--conn-extra '(\{.*?\})'", shell, flags=re.S)]
    [restart] = [e for e in extras if "backend" in e]
    [prometheus] = [e for e in extras if e.get("kind") == "prometheus"]
    backend = backend_from_config(restart, core_v1=object())
    assert isinstance(backend, KubernetesBackend) and backend.strimzi
    assert backend.pod_name(2) == "my-cluster-broker-2"
    assert isinstance(probe_from_config(prometheus), PrometheusProbe)


def test_yaml_examples_parse_and_the_metrics_config_points_at_the_configmap():
    docs = [yaml.safe_load(b) for b in _code_blocks("yaml")]
    [kafka] = [d for d in docs if d.get("kind") == "Kafka"]
    ref = kafka["spec"]["kafka"]["metricsConfig"]["valueFrom"]["configMapKeyRef"]
    shell = "\n".join(_code_blocks("bash"))
    assert f"create configmap {ref['name']}" in shell
    assert f"--from-file={ref['key']}=stack/jmx-exporter/kafka.yml" in shell


def test_the_approval_settings_and_outcomes_are_documented():
    from kafka_runbooks import approval

    section = _section("Approval records, ungated runs and four eyes")
    for name in (
        approval.ALLOW_UNGATED_VARIABLE,
        approval.ALLOW_UNGATED_ENV,
        approval.FOUR_EYES_VARIABLE,
        approval.FOUR_EYES_ENV,
        "approval_timeout_s",
        "rejected by <user>",
        "not approved within <timeout>",
        "triggering_user_name",
    ):
        assert name in section, name
