"""The local stack's Kafka release (``KR_KAFKA_VERSION``) and that release's jars.

A stand-in ``mvn`` on PATH answers as Maven 3.8 did here: it refuses a pom naming an artifact
the registry does not serve with Maven's own words (``connect-file`` 4.4.0 was refused so), and
otherwise drops the pom's jars where it is told to; so the fetch is checked without Maven
Central: the optional part left out and said, a required one named, nothing fetched twice.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from kafka_runbooks_dev.localstack import cds, jars, kraft_format
from kafka_runbooks_dev.localstack import stack as stack_module
from kafka_runbooks_dev.localstack.cli import main
from kafka_runbooks_dev.localstack.stack import LocalStack, StackError
from kafka_runbooks_dev.localstack.topology import Topology

# Maven 3.8.7's three wordings for an artifact the registry does not have, as printed here
REFUSED_FIRST = (
    "[ERROR] Failed to execute goal on project local-stack: Could not resolve dependencies for project "
    "io.github.kafka-runbooks:local-stack:pom:0: Could not find artifact org.apache.kafka:connect-file:jar:4.4.0 "
    "in central (https://repo.maven.apache.org/maven2) -> [Help 1]"
)
REFUSED_CACHED = (
    "[ERROR] Failed to execute goal on project local-stack: Could not resolve dependencies for project "
    "io.github.kafka-runbooks:local-stack:pom:0: org.apache.kafka:connect-file:jar:4.2.2 was not found in "
    "https://repo.maven.apache.org/maven2 during a previous attempt. This failure was cached in the local "
    "repository and resolution is not reattempted until the update interval of central has elapsed"
)
REFUSED_LISTED = (
    "The following artifacts could not be resolved: org.apache.kafka:kafka_2.13:jar:4.9.0 (absent): "
    "Failure to find org.apache.kafka:kafka_2.13:jar:4.9.0 in https://repo.maven.apache.org/maven2 was cached"
)
NETWORK_DOWN = (
    "[ERROR] Failed to execute goal on project local-stack: Could not resolve dependencies for project "
    "io.github.kafka-runbooks:local-stack:pom:0: Could not transfer artifact org.apache.kafka:kafka_2.13:jar:4.3.1 "
    "from/to central (https://repo.maven.apache.org/maven2): Connection refused"
)

FAKE_MVN = """#!/bin/sh
echo "$@" >> {calls}
for arg in "$@"; do
  case "$arg" in
    -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";;
  esac
  [ -n "$pom_next" ] && pom="$arg" && pom_next=
  [ "$arg" = "-f" ] && pom_next=1
done
version=$(sed -n 's#.*<kafka.version>\\(.*\\)</kafka.version>.*#\\1#p' "$pom")
for artifact in {refuse}; do
  if grep -q "<artifactId>$artifact</artifactId>" "$pom"; then
    echo "[ERROR] Failed to execute goal on project local-stack: Could not resolve dependencies for project \
io.github.kafka-runbooks:local-stack:pom:0: Could not find artifact org.apache.kafka:$artifact:jar:$version in central"
    exit 1
  fi
done
{network}
for artifact in $(sed -n 's#.*<artifactId>\\(kafka_2.13\\|connect-[a-z]*\\|jmx_prometheus_javaagent\\)</artifactId>.*#\\1#p' "$pom"); do
  touch "$out/$artifact-$version.jar"
done
"""


def fake_mvn(tmp_path: Path, monkeypatch, refuse: str = "", network_down: bool = False) -> Path:
    """Put a stand-in ``mvn`` first on PATH that refuses the artifactIds in ``refuse``; returns the
    file its calls are written to."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "mvn-calls"
    bin_dir.mkdir(exist_ok=True)
    network = f'echo "{NETWORK_DOWN}"; exit 1' if network_down else ""
    (bin_dir / "mvn").write_text(FAKE_MVN.format(calls=calls, refuse=refuse, network=network))
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


@pytest.fixture
def archives(monkeypatch) -> list[tuple[Path, str]]:
    """The archive builds ensure_jars asks for (a real dump of empty stand-in jars would only
    measure the JDK; the real archive is checked on the real stack, tests/integration)."""
    asked: list[tuple[Path, str]] = []
    monkeypatch.setattr(cds, "ensure_archive", lambda lib, classpath: asked.append((lib, classpath)))
    return asked


def test_the_release_is_the_setting_a_line_or_the_pinned_one_and_nothing_else():
    assert jars.pinned() == "4.3.1" == jars.selected({})
    assert jars.selected({"KR_KAFKA_VERSION": "3.9.2"}) == "3.9.2"
    assert jars.selected({"KR_KAFKA_VERSION": "4.0"}) == jars.LINES["4.0"] == "4.0.2"
    assert jars.selected({"KR_KAFKA_VERSION": "4.2.0"}) == "4.2.0"  # another patch of a supported line
    assert jars.selected({}, recorded="4.1.2") == "4.1.2"  # a stack keeps its release
    assert jars.selected({"KR_KAFKA_VERSION": "4.0.2"}, recorded="4.1.2") == "4.0.2"  # said: checked at start
    with pytest.raises(StackError, match=r"KR_KAFKA_VERSION='latest' is not a Kafka release"):
        jars.selected({"KR_KAFKA_VERSION": "latest"})
    with pytest.raises(StackError, match=r"Kafka 3\.8\.1 is not supported .*3\.9\.x, 4\.0\.x"):
        jars.selected({"KR_KAFKA_VERSION": "3.8.1"})  # a ZooKeeper-era line: KRaft 3.9+ only


def test_the_release_pom_is_the_pinned_pom_with_its_version_and_without_what_is_left_out():
    pom = jars.release_pom("3.9.2")
    assert re.findall(r"<kafka.version>(.*)</kafka.version>", pom) == ["3.9.2"]
    assert pom.count("<dependency>") == jars.POM.read_text().count("<dependency>") == 9
    smaller = jars.release_pom("4.4.0", ("connect-file",))
    assert "<artifactId>connect-file</artifactId>" not in smaller
    assert smaller.count("<dependency>") == 8 and "<artifactId>connect-runtime</artifactId>" in smaller


def test_maven_saying_an_artifact_is_not_served_is_read_in_each_of_its_wordings():
    assert jars.not_served(REFUSED_FIRST) == ["org.apache.kafka:connect-file"]
    assert jars.not_served(REFUSED_CACHED) == ["org.apache.kafka:connect-file"]
    assert jars.not_served(REFUSED_LISTED) == ["org.apache.kafka:kafka_2.13"]
    assert jars.not_served(NETWORK_DOWN) == []  # no answer is not a 'no': nothing is taken as missing


def test_an_unserved_file_connector_jar_is_left_out_said_and_not_fetched_again(
    tmp_path, monkeypatch, archives
):
    calls = fake_mvn(tmp_path, monkeypatch, refuse="connect-file")
    lib = jars.ensure_jars(tmp_path / "lib-4.4.0", "4.4.0")
    assert sorted(p.name for p in lib.glob("*.jar")) == [
        "connect-json-4.4.0.jar",
        "connect-runtime-4.4.0.jar",
        "jmx_prometheus_javaagent-4.4.0.jar",
        "kafka_2.13-4.4.0.jar",
    ]
    assert [m.line() for m in jars.missing_parts(lib)] == [
        "Kafka 4.4.0: org.apache.kafka:connect-file:4.4.0 is not served by Maven Central: "
        "the Connect worker starts without the file connectors (FileStreamSource/SinkConnector)"
    ]
    assert jars.lacks(lib, jars.FILE_CONNECTORS).artifact == "org.apache.kafka:connect-file:4.4.0"
    assert jars.lacks(lib, jars.CONNECT_WORKER) is None
    assert len(calls.read_text().splitlines()) == 2  # the whole pom, then without connect-file
    assert (lib / ".complete").exists() and archives == [(lib, jars.kafka_classpath(lib))]
    jars.ensure_jars(tmp_path / "lib-4.4.0", "4.4.0")
    assert len(calls.read_text().splitlines()) == 2  # fetched once: the marker is the whole pom's


def test_a_release_with_every_jar_lacks_nothing_and_keeps_the_file_connectors_apart(
    tmp_path, monkeypatch, archives
):
    fake_mvn(tmp_path, monkeypatch)
    lib = jars.ensure_jars(tmp_path / "lib-3.9.2", "3.9.2")
    assert jars.missing_parts(lib) == []
    assert (lib / "connect-plugins" / "file-connectors" / "connect-file-3.9.2.jar").exists()
    assert "connect-file" not in jars.kafka_classpath(lib)


def test_without_the_connect_runtime_there_is_no_worker_and_no_file_connectors(
    tmp_path, monkeypatch, archives
):
    fake_mvn(tmp_path, monkeypatch, refuse="connect-runtime")
    lib = jars.ensure_jars(tmp_path / "lib-4.4.0", "4.4.0")
    assert not list(lib.rglob("connect-*.jar"))  # connect-json and connect-file left out with it
    assert [m.part for m in jars.missing_parts(lib)] == [jars.CONNECT_WORKER]
    assert jars.lacks(lib, jars.FILE_CONNECTORS).artifact == "org.apache.kafka:connect-runtime:4.4.0"


def test_a_broker_jar_not_served_fails_the_fetch_naming_it(tmp_path, monkeypatch, archives):
    fake_mvn(tmp_path, monkeypatch, refuse="kafka_2.13")
    with pytest.raises(
        StackError, match=r"the Kafka 4\.9\.9 jars \(not served: org\.apache\.kafka:kafka_2\.13\)"
    ):
        jars.ensure_jars(tmp_path / "lib-4.9.9", "4.9.9")
    assert not (tmp_path / "lib-4.9.9" / ".complete").exists() and archives == []


def test_a_registry_that_does_not_answer_fails_the_fetch_and_records_nothing_missing(
    tmp_path, monkeypatch, archives
):
    fake_mvn(tmp_path, monkeypatch, network_down=True)
    with pytest.raises(StackError, match="Connection refused"):
        jars.ensure_jars(tmp_path / "lib-4.3.1", "4.3.1")
    assert not (tmp_path / "lib-4.3.1" / jars.MISSING_FILE).exists()  # the next start tries again


def _formatted_stack(home: Path, recorded: str | None) -> None:
    """A stack folder as a start leaves it: stack.json and one formatted controller."""
    home.mkdir(parents=True)
    state = {"cluster_id": "abc", "topology": Topology(port_base=20000).to_json()}
    if recorded:
        state["kafka_version"] = recorded
    (home / "stack.json").write_text(json.dumps(state))
    (home / "controller-9001" / "data").mkdir(parents=True)
    (home / "controller-9001" / "data" / "meta.properties").write_text("version=1\n")


def test_a_formatted_stack_keeps_its_release_and_refuses_another(tmp_path, monkeypatch):
    _formatted_stack(tmp_path / "s", "3.9.2")
    monkeypatch.delenv("KR_KAFKA_VERSION", raising=False)
    kept = LocalStack(home=tmp_path / "s")
    assert (kept.kafka_version, kept.lib_dir.name) == ("3.9.2", "lib-3.9.2")
    state = kept._state()
    kraft_format.record_release(kept, state)
    assert state["kafka_version"] == "3.9.2"
    monkeypatch.setenv("KR_KAFKA_VERSION", "4.3")
    other = LocalStack(home=tmp_path / "s")
    with pytest.raises(StackError, match=r"formatted with Kafka 3\.9\.2; KR_KAFKA_VERSION asks for 4\.3\.1"):
        other._write_state()
    assert json.loads((tmp_path / "s" / "stack.json").read_text())["kafka_version"] == "3.9.2"


def test_a_stack_given_its_release_runs_it_whatever_the_environment_says(tmp_path, monkeypatch):
    """The tests' compat stacks run another release than the session's in the same process."""
    monkeypatch.setenv("KR_KAFKA_VERSION", "4.3.1")
    stack = LocalStack(home=tmp_path / "s", topology=Topology(port_base=20000), kafka_version="3.9")
    assert (stack.kafka_version, stack.lib_dir.name) == ("3.9.2", "lib-3.9.2")
    assert LocalStack(home=tmp_path / "t", topology=Topology(port_base=20000)).kafka_version == "4.3.1"
    with pytest.raises(StackError, match=r"Kafka 2\.8\.2 is not supported"):
        LocalStack(home=tmp_path / "u", kafka_version="2.8.2")
    _formatted_stack(tmp_path / "old", "4.0.2")  # formatted by another: refused, as for the variable
    with pytest.raises(StackError, match=r"formatted with Kafka 4\.0\.2"):
        LocalStack(home=tmp_path / "old", kafka_version="3.9.2")._write_state()


def test_a_stack_formatted_before_the_record_ran_4_3_1_and_an_unformatted_one_takes_the_new_release(
    tmp_path, monkeypatch
):
    _formatted_stack(tmp_path / "old", None)
    monkeypatch.setenv("KR_KAFKA_VERSION", "4.0.2")
    with pytest.raises(StackError, match=r"formatted with Kafka 4\.3\.1"):
        LocalStack(home=tmp_path / "old")._write_state()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "stack.json").write_text(json.dumps({"cluster_id": "abc", "kafka_version": "4.3.1"}))
    stack = LocalStack(home=fresh, topology=Topology(port_base=20000))
    stack._write_state()  # nothing formatted yet (a start that failed before): no log to protect
    assert json.loads((fresh / "stack.json").read_text())["kafka_version"] == "4.0.2"


def _lib_lacking(lib: Path, missing: jars.Missing) -> None:
    """A release folder as ensure_jars leaves it when ``missing`` was not served."""
    (lib / "connect-plugins").mkdir(parents=True)
    (lib / jars.MISSING_FILE).write_text(json.dumps([asdict(missing)]))


def test_a_stack_without_its_connect_worker_has_no_connect_url_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(LocalStack, "is_running", lambda self, ref: False)
    lib = tmp_path / "lib-4.4.0"
    gone = jars.Missing(
        jars.CONNECT_WORKER, "org.apache.kafka:connect-runtime:4.4.0", "4.4.0", "no Connect worker is started"
    )
    _lib_lacking(lib, gone)
    monkeypatch.setattr(stack_module, "ensure_jars", lambda lib_dir, version: lib_dir)
    monkeypatch.setenv("KR_KAFKA_VERSION", "4.4.0")
    stack = LocalStack(home=tmp_path / "s", topology=Topology(port_base=20000), lib_dir=lib)
    assert stack.topology.connect_url and stack.connect_url is None
    assert "kafka_connect_default" not in stack.airflow_connections()
    with pytest.raises(
        StackError, match=r"connect-runtime:4\.4\.0 is not served by Maven Central: no Connect worker"
    ):
        stack.start_node("connect")


def test_kstack_status_names_the_release_and_what_it_lacks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(jars, "LIB_ROOT", tmp_path)
    lib = jars.lib_dir_for("4.4.0")
    file_sink = jars.Missing(
        jars.FILE_CONNECTORS, "org.apache.kafka:connect-file:4.4.0", "4.4.0", jars.OPTIONAL_PARTS[1].without
    )
    _lib_lacking(lib, file_sink)
    monkeypatch.setenv("KR_KAFKA_VERSION", "4.4")
    monkeypatch.setenv("KR_STACK_PORT_BASE", "20000")
    assert main(["--home", str(tmp_path / "s"), "status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Kafka 4.4.0 (jars: {lib})"
    assert out[1] == (
        "Kafka 4.4.0: org.apache.kafka:connect-file:4.4.0 is not served by Maven Central: the Connect worker "
        "starts without the file connectors (FileStreamSource/SinkConnector)"
    )
    assert main(["--home", str(tmp_path / "s"), "fail-connector"]) == 2
    assert "fail-connector needs the file connectors: Kafka 4.4.0: org.apache.kafka:connect-file:4.4.0" in (
        capsys.readouterr().err
    )


def test_a_jvm_that_rejects_the_archive_starts_without_it(tmp_path):
    """An archive another JDK (or a broken dump) left is refused by the JVM, which then starts
    as if there were none: -Xshare:auto, as every node is launched."""
    jar = tmp_path / "empty.jar"
    jar.touch()
    archive = cds.archive_path(tmp_path, str(jar))
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not a CDS archive" * 100)
    flags = cds.jvm_flags(tmp_path, str(jar))
    assert flags == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    started = subprocess.run(["java", *flags, "-cp", str(jar), "-version"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    refused = subprocess.run(
        ["java", "-XX:SharedArchiveFile=" + str(archive), "-Xshare:on", "-version"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0  # the archive really is unusable: auto fell back, on would not


def test_kstack_refuses_a_release_it_does_not_support_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KR_KAFKA_VERSION", "2.8.2")
    assert main(["--home", str(tmp_path / "s"), "status"]) == 2
    assert capsys.readouterr().err == (
        "kstack: KR_KAFKA_VERSION=2.8.2: Kafka 2.8.2 is not supported by the local stack "
        "(KRaft releases 3.9.x, 4.0.x, 4.1.x, 4.2.x, 4.3.x, 4.4.x)\n"
    )
