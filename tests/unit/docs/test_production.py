"""docs/production.md keeps up with the code: every DAG says what it never does, every
connection id and setting the code reads is documented and every setting the doc names is
read (Airflow options included), links resolve, the example connection extras are accepted
by the real factories that will read them, and what it says of the data store holds: the
fsspec package per URL, where compare-and-set is wired, a pod template with no volume for
runbook state, the S3A settings spark_conf() derives, the Celery settings compose runs."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
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
        approval.APPROVE_OPTION,  # the gates' options as an approver sees them (issue #39)
        approval.REJECT_OPTION,
        "(chose 'Approve: run the plan') at <time>",
        "not approved within <timeout>",
        "triggering_user_name",
    ):
        assert name in section, name


# ------------------------------------------------------------------ where state lives
def _names_the_code_reads() -> tuple[str, dict[str, set[str]]]:
    """The code's text, and the families of settings it reads as f"PREFIX{key.upper()}"."""
    from kafka_runbooks_airflow.failed_broker import SWEEP_DEFAULTS
    from kafka_runbooks_airflow.health import HEALTH_DEFAULTS

    code = "\n".join(
        path.read_text()
        for folder in ("dags", "plugins", "include")
        for path in (ROOT / folder).rglob("*.py")
        if "localstack" not in path.parts
    )
    families = {
        "KAFKA_RUNBOOKS_FAILED_BROKER_": set(SWEEP_DEFAULTS),
        "KAFKA_RUNBOOKS_HEALTH_": set(HEALTH_DEFAULTS),
    }
    # a family's prefix is a constant handed to kafka_runbooks.settings.layered_settings
    found = set(re.findall(r'"(KAFKA_RUNBOOKS_[A-Z_]+_)"', code))
    assert found == set(families), (
        f"settings read by prefix: {sorted(found)}; the test knows {sorted(families)}"
    )
    return code, families


def test_every_setting_the_doc_names_is_read_by_the_code():
    code, families = _names_the_code_reads()
    named = set(re.findall(r"KAFKA_RUNBOOKS_[A-Z0-9_]*(?:<KEY>|[A-Z0-9])", _text()))
    assert "KAFKA_RUNBOOKS_DATA_URL" in named  # the scan works
    unread = []
    for name in sorted(named):
        if re.search(rf"\b{re.escape(name)}\b", code):
            continue
        prefix = next((p for p in families if name.startswith(p)), None)
        rest = name[len(prefix) :] if prefix else None
        if prefix and (rest == "<KEY>" or rest.lower() in families[prefix]):
            continue
        unread.append(name)
    assert not unread, f"the doc names settings no code reads: {unread}"


def test_every_airflow_option_the_doc_names_exists():
    from airflow.configuration import conf

    described = conf.configuration_description
    named = set(re.findall(r"AIRFLOW__[A-Z0-9_]+?__[A-Z0-9_]+", _text()))
    assert "AIRFLOW__CORE__EXECUTOR" in named and "AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE" in named
    for name in named:
        section, key = name[len("AIRFLOW__") :].lower().split("__", 1)
        assert key in described.get(section, {}).get("options", {}), f"{name} is not an Airflow option"


def _store_rows() -> list[list[str]]:
    """The store table's rows (deployment, URL, credentials, package, compare-and-set)."""
    rows = []
    for line in _section("Where state and artifacts live").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if (
            line.startswith("|")
            and len(cells) == 5
            and not set(cells[0]) <= {"-"}
            and cells[0] != "deployment"
        ):
            rows.append(cells)
    return rows


def test_the_store_table_names_the_package_fsspec_uses_for_each_url():
    from fsspec.registry import known_implementations

    rows = [r for r in _store_rows() if "://" in r[1]]
    assert {re.search(r"`(\w+)://", r[1]).group(1) for r in rows} == {"s3", "gs", "abfs"}
    requirements = (ROOT / "requirements.txt").read_text()
    for _, url, _, package, _ in rows:
        protocol = re.search(r"`(\w+)://", url).group(1)
        [name] = re.findall(r"`([a-z0-9]+)`", package)
        assert known_implementations[protocol]["class"].split(".")[0] == name, protocol
        pinned = re.search(rf"^{name}==", requirements, flags=re.M) is not None
        assert pinned == ("in requirements.txt" in package), (
            f"{name}: pinned={pinned}, the doc says {package!r}"
        )


def test_compare_and_set_is_wired_where_the_doc_says_and_refused_elsewhere(monkeypatch, tmp_path):
    from kafka_runbooks.storage import ConditionalWritesUnsupported, Store

    rows = {re.search(r"`(\w+)://", r[1]).group(1): r[4] for r in _store_rows() if "://" in r[1]}
    for protocol, claim in rows.items():
        store = Store(f"{protocol}://bucket/prefix")
        if claim.endswith("not wired"):
            # refused even where the store would honour a precondition: not implemented here
            monkeypatch.setattr(Store, "supports_conditional_writes", lambda self: True)
            with pytest.raises(ConditionalWritesUnsupported):
                store.require_conditional_writes()
            monkeypatch.undo()
        else:
            assert claim.endswith(": wired"), claim
            monkeypatch.setattr(Store, "supports_conditional_writes", lambda self: True)
            store.require_conditional_writes()
            monkeypatch.setattr(Store, "supports_conditional_writes", lambda self: False)
            with pytest.raises(ConditionalWritesUnsupported):  # a store whose probe fails
                store.require_conditional_writes()
            monkeypatch.undo()
    local = Store(str(tmp_path))
    assert local.create("lease.json", "a") and not local.create("lease.json", "b")
    assert "not wired yet" in _section("Where state and artifacts live")


def test_the_pod_template_keeps_no_runbook_state_on_a_volume():
    docs = [yaml.safe_load(b) for b in _code_blocks("yaml")]
    [pod] = [d for d in docs if d.get("kind") == "Pod"]
    [container] = pod["spec"]["containers"]
    assert container["name"] == "base"  # where the Kubernetes executor runs the task
    env = {e["name"]: e for e in container["env"]}
    code, _ = _names_the_code_reads()
    for name in env:
        assert name in code or name in {
            "SPARK_LOCAL_HOSTNAME",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
        }, name
    from kafka_runbooks.storage import protocol_of

    assert protocol_of(env["KAFKA_RUNBOOKS_DATA_URL"]["value"]) == "s3"
    assert isinstance(json.loads(env["KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS"]["value"]), dict)
    assert env["SPARK_LOCAL_HOSTNAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # Only read-only secrets and config maps: no claim, no host path, no scratch volume.
    for volume in pod["spec"].get("volumes", []):
        assert set(volume) - {"name"} <= {"secret", "configMap"}, volume
    assert all(m.get("readOnly") for m in container.get("volumeMounts", []))
    rbac = [
        d
        for d in yaml.safe_load_all((ROOT / "docs" / "k8s" / "airflow-kafka-runbooks-rbac.yaml").read_text())
        if d
    ]
    [account] = [d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount"]
    assert pod["spec"]["serviceAccountName"] == account


def _hadoop_defaults() -> str:
    import zipfile

    import pyspark

    [jar] = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    with zipfile.ZipFile(jar) as z:
        return z.read("core-default.xml").decode()


def test_the_s3a_settings_the_doc_names_are_real_and_are_those_spark_conf_derives(monkeypatch):
    from kafka_runbooks import storage
    from kafka_runbooks_dev.local_spark import ensure_s3a_jars

    jars = ensure_s3a_jars()  # once per machine (the Celery and S3A tests use the same folder)
    named = set(re.findall(r"spark\.hadoop\.(fs\.s3a\.[a-z.]*[a-z])", _text()))
    defaults = _hadoop_defaults()
    # S3A's options: core-default.xml lists most; the rest are constants of hadoop-aws.
    import zipfile

    hadoop_aws = next(j for j in jars if j.name.startswith("hadoop-aws-"))
    with zipfile.ZipFile(hadoop_aws) as z:
        constants = z.read("org/apache/hadoop/fs/s3a/Constants.class").decode("latin-1")
    for key in named:
        if f"<name>{key}</name>" in defaults:
            continue
        assert key in constants, f"{key} is not a Hadoop option"
    monkeypatch.setenv(
        storage.OPTIONS_ENV,
        json.dumps({"client_kwargs": {"endpoint_url": "http://s3:9000", "region_name": "eu-west-1"}}),
    )
    derived = {
        k[len("spark.hadoop.") :]
        for k in storage.spark_conf("s3://bucket/prefix")
        if k.startswith("spark.hadoop.")
    }
    assert derived <= named, f"spark_conf() sets {sorted(derived - named)}, which the doc does not name"
    assert named - derived == {"fs.s3a.aws.credentials.provider"}
    # The doc's reason to name that one: S3A's default chain has no web-identity provider.
    chain = re.search(
        r"<name>fs\.s3a\.aws\.credentials\.provider</name>\s*<value>(.*?)</value>", defaults, re.S
    )
    assert "WebIdentity" not in chain.group(1) and "EnvironmentVariableCredentialsProvider" in chain.group(1)


def test_the_s3a_jar_versions_in_the_doc_are_the_pinned_ones():
    import xml.etree.ElementTree as ET

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(ROOT / "stack" / "spark-s3a" / "pom.xml").getroot()
    section = _section("Connections")
    for dep in pom.findall("m:dependencies/m:dependency", ns):
        artifact, version = dep.find("m:artifactId", ns).text, dep.find("m:version", ns).text
        assert re.search(rf"`{re.escape(artifact)}`\s+{re.escape(version)}\b", section), (artifact, version)


def test_the_celery_settings_are_the_compose_files_and_the_pins_are_requirements():
    from tests.unit.test_docker_compose import load_compose

    section = _section("Where state and artifacts live")
    celery = section[section.index("### Celery executor") : section.index("### Kubernetes executor")]
    env = load_compose()["services"]["airflow-scheduler"]["environment"]
    rows = re.findall(r"^\| `(AIRFLOW__[A-Z_]+)` \|[^`|]*`([^`]+)`", celery, flags=re.M)
    assert {name for name, _ in rows} == {
        "AIRFLOW__CORE__EXECUTOR",
        "AIRFLOW__CELERY__BROKER_URL",
        "AIRFLOW__CELERY__RESULT_BACKEND",
    }
    for name, example in rows:
        assert env[name] == example, name
    requirements = (ROOT / "requirements.txt").read_text()
    for package, text in (("celery[redis]", "celery "), ("apache-airflow-providers-celery", "provider ")):
        version = re.search(rf"^{re.escape(package)}==(\S+)", requirements, flags=re.M).group(1)
        assert f"{text}{version}" in celery, package


def _acl_rows() -> dict[str, tuple[set[str], set[str]]]:
    """production.md's ACL table: runbook -> (operations on the cluster, on every topic)."""
    text = _text()
    section = text[
        text.index("#### ACLs the runbooks principal needs") : text.index("Why, request by request")
    ]
    rows = {}
    for m in re.finditer(r"^\| `([a-z_]+)` \| ([^|]+) \| ([^|]+) \|$", section, flags=re.M):
        cluster, topic = (
            {op for op in re.findall(r"`([A-Z_]+)`", cell)} for cell in (m.group(2), m.group(3))
        )
        rows[m.group(1)] = (cluster, topic)
    return rows


def test_the_acl_list_is_the_table_the_runbooks_check():
    """docs/production.md's ACLs per runbook are kafka_runbooks.acl_table's, runbook for runbook (issue #38)."""
    from kafka_runbooks import acl_table

    want = {
        runbook: (
            {a.operation for a in acl_table.needs(runbook) if a.resource == acl_table.CLUSTER},
            {a.operation for a in acl_table.needs(runbook) if a.resource == acl_table.TOPIC},
        )
        for runbook in acl_table.RUNBOOK_REQUESTS
    }
    assert _acl_rows() == want
    assert set(want) == _dag_ids()


def test_the_connections_pages_secured_examples_are_the_secured_stacks_connections(tmp_path):
    """docs/connections.md's SASL_SSL and mTLS extras have the keys of the secured local stack's
    kafka_default (what tests/integration/test_secured_stack.py runs the runbooks with), and the
    translation for kafka-python accepts them."""
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    text = (ROOT / "docs" / "connections.md").read_text()
    section = text[text.index("### `kafka_default` over SASL_SSL or mTLS") :]
    examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, flags=re.S)]
    stack = LocalStack(home=tmp_path / "stack", topology=Topology(security="sasl_ssl"))
    for example, auth in zip(examples, ("sasl_ssl", "mtls"), strict=True):
        real = stack.client_config(auth=auth)
        assert set(example) == set(real), auth
        assert example["bootstrap.servers"] == real["bootstrap.servers"], auth
        assert {k: v for k, v in example.items() if "password" not in k and "location" not in k} == {
            k: v for k, v in real.items() if "password" not in k and "location" not in k
        }
        assert to_kafka_python(example)["security_protocol"] == real["security.protocol"]
