"""The images' jars (issue #40): fetched by Maven through ``docker/jars/fetch.sh`` (so through the
repository the builder's settings.xml names: Maven Central, a mirror, a proxy), never from a URL
written into a Dockerfile, and checked against ``docker/jars/SHA256SUMS``, whose lines are the
checksums of the very jars the local stack and the tests run. The script itself runs here, with
the machine's Maven, and is shown to refuse other bytes."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kafka_runbooks_dev.local_spark import S3A_LIB, S3A_POM, ensure_s3a_jars
from kafka_runbooks_dev.localstack.stack import ensure_jars
from tests.unit.test_docker_compose import (
    PINNED_TAG,
    _compose,
    _dockerfile,
    _pom_dependencies,
    _pom_property,
    _services,
    load_compose,
)

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / "docker" / "jars"
FETCH = JARS / "fetch.sh"
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))
# what each image fetches, by the compose service that builds it
IMAGES = {"broker-1": "kafka", "s3proxy": "s3proxy", "spark-worker": "spark", "airflow-worker": "airflow"}
_FETCH_RUN = re.compile(r"^RUN (?P<mounts>(?:--mount=\S+ +)*)/jars/fetch\.sh /out (?P<coords>.+)$", re.M)
_STAGE = re.compile(r"^FROM (?P<image>\S+) AS jars$", re.M)


def _joined(dockerfile: Path) -> str:
    """The Dockerfile with its continued lines joined and its comments left out."""
    lines = [line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")]
    return re.sub(r" *\\\n *", " ", "\n".join(lines))


def _fetched(dockerfile: Path) -> list[str]:
    """The Maven coordinates the Dockerfile's jars stage fetches."""
    found = _FETCH_RUN.search(_joined(dockerfile))
    return found["coords"].split() if found else []


def _jar_name(coordinates: str) -> str:
    """group:artifact:version[:jar:classifier] -> the file name Maven copies it as."""
    parts = coordinates.split(":")
    classifier = f"-{parts[4]}" if len(parts) == 5 else ""
    return f"{parts[1]}-{parts[2]}{classifier}.jar"


def _sums(path: Path = JARS / "SHA256SUMS") -> dict[str, str]:
    """SHA256SUMS: jar file name -> sha256."""
    return {
        name: sha for sha, name in (line.split("  ", 1) for line in path.read_text().splitlines() if line)
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fetch(out: Path, *coordinates: str, script: Path = FETCH) -> subprocess.CompletedProcess:
    """fetch.sh as a jars stage runs it, with this machine's Maven and settings."""
    return subprocess.run(
        ["sh", str(script), str(out), *coordinates], capture_output=True, text=True, timeout=600
    )


def test_no_dockerfile_downloads_from_a_url():
    for dockerfile in DOCKERFILES:
        text = _joined(dockerfile)
        assert not re.search(r"(https?|ftp)://", text), f"{dockerfile} downloads from a URL"


def test_every_image_fetches_its_jars_in_a_maven_stage_with_the_builders_settings():
    services = _services()
    for service, image in IMAGES.items():
        dockerfile = _dockerfile(services[service])
        assert dockerfile == ROOT / "docker" / image / "Dockerfile"
        text = _joined(dockerfile)
        stage = _STAGE.search(text)
        assert stage and stage["image"].startswith("maven:") and PINNED_TAG.match(stage["image"]), dockerfile
        run = _FETCH_RUN.search(text)
        assert run and "--mount=type=secret,id=maven_settings,target=/root/.m2/settings.xml" in run["mounts"]
        assert "COPY docker/jars/ /jars/" in text
        copied = re.findall(r"^COPY --from=jars \S+ /out/(\S*) ", text, flags=re.M)
        fetched = {_jar_name(c) for c in _fetched(dockerfile)}
        assert copied and all(name in fetched or name == "" for name in copied), (dockerfile, copied)
        assert "maven_settings" in services[service]["build"]["secrets"], service


def test_every_fetched_jar_has_its_checksum_and_every_checksum_a_jar():
    fetched = {_jar_name(c) for d in DOCKERFILES for c in _fetched(d)}
    assert fetched == set(_sums()), sorted(fetched ^ set(_sums()))


def test_the_images_fetch_the_versions_the_project_pins():
    services = _services()
    fetched = {service: _fetched(_dockerfile(services[service])) for service in IMAGES}
    agent = _pom_property("jmx.exporter.version")
    assert fetched["broker-1"] == [f"io.prometheus.jmx:jmx_prometheus_javaagent:{agent}"]
    s3proxy = _pom_dependencies(ROOT / "stack" / "s3proxy" / "pom.xml")[("org.gaul", "s3proxy")]
    assert fetched["s3proxy"] == [f"org.gaul:s3proxy:{s3proxy}:jar:jar-with-dependencies"]
    s3a = sorted(f"{g}:{a}:{v}" for (g, a), v in _pom_dependencies(S3A_POM).items())
    assert len(s3a) == 3 and sorted(fetched["spark-worker"]) == s3a == sorted(fetched["airflow-worker"])


def test_the_checksums_are_those_of_the_jars_the_local_stack_and_the_s3a_tests_run():
    sums = _sums()
    agent = f"jmx_prometheus_javaagent-{_pom_property('jmx.exporter.version')}.jar"
    assert _sha256(ensure_jars() / agent) == sums[agent]
    ensure_s3a_jars()  # once per machine (the Celery and S3A tests use the same folder)
    for (_, artifact), version in _pom_dependencies(S3A_POM).items():
        name = f"{artifact}-{version}.jar"
        assert _sha256(S3A_LIB / name) == sums[name], name


def test_fetch_sh_fetches_with_maven_and_refuses_other_bytes_or_a_jar_without_its_line(tmp_path):
    if shutil.which("mvn") is None:
        pytest.fail("mvn is not on PATH: scripts/bootstrap.sh installs it")
    agent = f"io.prometheus.jmx:jmx_prometheus_javaagent:{_pom_property('jmx.exporter.version')}"
    s3proxy = next(c for c in _fetched(ROOT / "docker" / "s3proxy" / "Dockerfile"))
    done = _fetch(tmp_path / "out", agent, s3proxy)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in (_jar_name(agent), _jar_name(s3proxy)):
        assert _sha256(tmp_path / "out" / name) == _sums()[name], name
    other = tmp_path / "other"
    shutil.copytree(JARS, other)
    sums = (other / "SHA256SUMS").read_text()
    (other / "SHA256SUMS").write_text(sums.replace(_sums()[_jar_name(agent)], "0" * 64))
    refused = _fetch(tmp_path / "out2", agent, script=other / "fetch.sh")
    assert refused.returncode != 0 and f"{_jar_name(agent)}: FAILED" in refused.stdout, refused.stdout
    (other / "SHA256SUMS").write_text(
        "".join(line for line in sums.splitlines(True) if _jar_name(agent) not in line)
    )
    unlisted = _fetch(tmp_path / "out3", agent, script=other / "fetch.sh")
    assert unlisted.returncode != 0 and f"no checksum for {_jar_name(agent)}" in unlisted.stderr


def test_pip_installs_through_the_builders_pip_conf_and_both_secrets_default_to_files_here():
    services = _services()
    for service in ("spark-worker", "airflow-worker"):
        text = _joined(_dockerfile(services[service]))
        installs = re.findall(r"^RUN (.*\bpip install\b.*)$", text, flags=re.M)
        assert installs and all("--mount=type=secret,id=pip_conf,target=/etc/pip.conf" in r for r in installs)
        assert "pip_conf" in services[service]["build"]["secrets"], service
    for name, setting, default in (
        ("maven_settings", "MAVEN_SETTINGS", "docker/jars/settings.xml"),
        ("pip_conf", "PIP_CONFIG_FILE", "docker/jars/pip.conf"),
    ):
        assert _compose()["secrets"][name]["file"] == f"./{default}" and (ROOT / default).is_file()
        assert load_compose({setting: "/home/me/mine"})["secrets"][name]["file"] == "/home/me/mine"
