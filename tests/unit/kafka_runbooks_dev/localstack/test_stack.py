"""``fetch_with_maven``: the one jar fetch behind the Kafka stack and S3Proxy.

A stand-in ``mvn`` on PATH records its calls and drops two jars where it is told to, so the
fetch is checked without Maven Central: once per pom, laid out before the marker, and a
failed fetch names what it was fetching.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_runbooks_dev.localstack.stack import StackError, _set_connect_plugins_apart, fetch_with_maven

FAKE_MVN = """#!/bin/sh
echo "$@" >> {calls}
sleep {delay}
for arg in "$@"; do
  case "$arg" in
    -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}"; touch "$out/kafka-clients.jar" "$out/connect-file-4.1.0.jar";;
  esac
done
exit {status}
"""


def fake_mvn(tmp_path: Path, monkeypatch, status: int = 0, delay: float = 0) -> Path:
    """Put a stand-in ``mvn`` first on PATH; returns the file its calls are written to."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "mvn-calls"
    bin_dir.mkdir(exist_ok=True)
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(calls=calls, status=status, delay=delay))
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_the_jars_are_fetched_once_per_pom_and_laid_out_before_the_marker(tmp_path, monkeypatch):
    calls = fake_mvn(tmp_path, monkeypatch)
    pom, lib = tmp_path / "pom.xml", tmp_path / "lib"
    pom.write_text("<project/>")
    laid_out = []

    def arrange(lib_dir: Path) -> None:
        laid_out.append((sorted(p.name for p in lib_dir.iterdir()), (lib_dir / ".complete").exists()))

    assert fetch_with_maven(pom, lib, "the test jars", arrange) == lib
    assert laid_out == [(["connect-file-4.1.0.jar", "kafka-clients.jar"], False)]
    assert f"-f {pom} dependency:copy-dependencies -DoutputDirectory={lib}" in calls.read_text()
    fetch_with_maven(pom, lib, "the test jars", arrange)
    assert len(calls.read_text().splitlines()) == 1 and len(laid_out) == 1
    pom.write_text("<project><!-- another version --></project>")
    fetch_with_maven(pom, lib, "the test jars", arrange)
    assert len(calls.read_text().splitlines()) == 2 and len(laid_out) == 2


def test_two_fetches_at_once_fetch_once_and_both_find_the_jars(tmp_path, monkeypatch):
    """Two test lanes starting together: the second waits for the first instead of emptying
    its folder mid-fetch (seen: FileExistsError from the plugin layout of a concurrent fetch)."""
    import threading

    calls = fake_mvn(tmp_path, monkeypatch, delay=1)
    pom, lib = tmp_path / "pom.xml", tmp_path / "lib"
    pom.write_text("<project/>")
    results: list[object] = []

    def fetch() -> None:
        try:
            results.append(fetch_with_maven(pom, lib, "the Kafka jars", _set_connect_plugins_apart))
        except Exception as exc:  # the race shows as an exception in one of the two
            results.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [lib, lib]
    assert len(calls.read_text().splitlines()) == 1
    assert (lib / "connect-plugins" / "file-connectors" / "connect-file-4.1.0.jar").exists()


def test_a_failed_fetch_names_what_it_fetched_and_leaves_no_marker(tmp_path, monkeypatch):
    fake_mvn(tmp_path, monkeypatch, status=1)
    pom, lib = tmp_path / "pom.xml", tmp_path / "lib"
    pom.write_text("<project/>")
    with pytest.raises(StackError, match="mvn could not fetch S3Proxy"):
        fetch_with_maven(pom, lib, "S3Proxy")
    assert not (lib / ".complete").exists()


def test_the_file_connectors_go_to_connects_plugin_path(tmp_path):
    for name in ("kafka-clients.jar", "connect-file-4.1.0.jar"):
        (tmp_path / name).touch()
    _set_connect_plugins_apart(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.jar")) == ["kafka-clients.jar"]
    assert (tmp_path / "connect-plugins" / "file-connectors" / "connect-file-4.1.0.jar").exists()


def test_a_node_killed_before_it_wrote_anything_is_told_from_one_that_failed(tmp_path):
    """wait_ready launches a node once more only when a signal ended it before it wrote a byte
    (it never got to start); a node that exited on its own, or wrote anything, is its own failure."""
    import signal
    import subprocess
    import sys

    from kafka_runbooks_dev.localstack.stack import killed_before_writing

    log, out = tmp_path / "server.log", tmp_path / "stdout.log"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sleeper.send_signal(signal.SIGKILL)
    sleeper.wait()
    assert killed_before_writing(sleeper, (log, out)) == signal.SIGKILL
    out.write_text("Error: Could not find or load main class\n")
    assert killed_before_writing(sleeper, (log, out)) is None  # it said something: a real failure
    failed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    failed.wait()
    assert killed_before_writing(failed, (tmp_path / "none.log",)) is None
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert killed_before_writing(running, (tmp_path / "none.log",)) is None
    finally:
        running.kill()
        running.wait()
