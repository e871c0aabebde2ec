"""``make test-matrix``: the command once per release, with that release set, and a summary that
fails when any release's run failed. The command here is a stand-in printing pytest's closing
line for the release it was given (the real one is ``make test``'s pytest command)."""

from __future__ import annotations

import sys

from kafka_runbooks_dev.localstack import jars, matrix

# prints the release it runs with and a pytest closing line; 4.4.0 fails as a failed suite does
FAKE_SUITE = """
import os, sys
release = os.environ["KR_KAFKA_VERSION"]
print("running on", release)
if release == "4.4.0":
    print("==== 2 failed, 1791 passed, 1 error, 3 warnings in 1612.30s (0:26:52) ====")
    sys.exit(1)
print("1794 passed, 3 warnings in 1600.01s (0:26:40)")
"""


def test_pytest_closing_lines_are_read_whatever_their_decoration():
    assert matrix.pytest_counts("x\n==== 2 failed, 17 passed, 1 error in 3.20s ====\n") == {
        "failed": 2,
        "passed": 17,
        "error": 1,
    }
    assert matrix.pytest_counts("13 passed in 1.55s\n") == {"passed": 13}
    assert matrix.pytest_counts("3 errors in 0.10s") == {"error": 3}
    assert matrix.pytest_counts("no summary: the run was killed") == {}


def test_each_release_runs_with_its_version_and_the_summary_fails_for_the_one_that_failed(
    tmp_path, monkeypatch, capsys
):
    fetched: list[str] = []
    lib_44 = tmp_path / "lib-4.4.0"
    lib_44.mkdir()
    (lib_44 / jars.MISSING_FILE).write_text(
        '[{"part": "the file connectors", "artifact": "org.apache.kafka:connect-file:4.4.0", '
        '"release": "4.4.0", "without": "the Connect worker starts without the file connectors"}]'
    )

    def ensure(version: str):
        fetched.append(version)
        return lib_44 if version == "4.4.0" else tmp_path

    monkeypatch.setattr(jars, "ensure_jars", lambda version: ensure(version))
    code = matrix.main(
        ["--releases", "3.9,4.4.0", "--logs", str(tmp_path / "logs"), "--", sys.executable, "-c", FAKE_SUITE]
    )
    out = capsys.readouterr().out
    assert code == 1 and fetched == ["3.9.2", "4.4.0"]
    assert (tmp_path / "logs" / "3.9.2.log").read_text().startswith("running on 3.9.2\n")
    summary = out[out.index("===== the suite per Kafka release") :].splitlines()[1:]
    assert summary == [
        "Kafka 3.9.2   ok: 1794 passed, 0 failed",
        "Kafka 4.4.0   FAILED (exit 1): 1791 passed, 2 failed, 1 error",
        "    lacks: Kafka 4.4.0: org.apache.kafka:connect-file:4.4.0 is not served by Maven Central: "
        "the Connect worker starts without the file connectors",
    ]


def test_a_release_whose_broker_jars_cannot_be_fetched_is_not_run_and_fails_the_matrix(
    tmp_path, monkeypatch, capsys
):
    def refuse(version: str):
        raise jars.StackError(
            f"mvn could not fetch the Kafka {version} jars (not served: org.apache.kafka:kafka_2.13)"
        )

    monkeypatch.setattr(jars, "ensure_jars", lambda version: refuse(version))
    assert (
        matrix.main(["--releases", "4.3", "--logs", str(tmp_path), "--", sys.executable, "-c", "pass"]) == 1
    )
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Kafka 4.3.1   NOT RUN: mvn could not fetch the Kafka 4.3.1 jars (not served: org.apache.kafka:kafka_2.13)"
    )


def test_every_supported_line_is_in_the_matrix_by_default():
    assert matrix.releases(None) == ["3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0"]
