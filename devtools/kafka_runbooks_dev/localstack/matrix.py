"""``make test-matrix``: one command (``make test``'s pytest command) once per Kafka release.

    python -m kafka_runbooks_dev.localstack.matrix [--releases 3.9,4.4.0] [--logs DIR] -- CMD...

Each release in turn, one after the other (each run starts its own stacks): its jars are fetched
first and what it lacks is said; then ``CMD`` runs with ``KR_KAFKA_VERSION`` set to it, its
output shown and kept in ``DIR/<release>.log`` (default ``.stack/matrix``). At the end a summary
gives each release's passed / failed counts (pytest's closing line) and what it lacks; the exit
status is 1 if any release's run failed or its jars could not be fetched.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kafka_runbooks_dev.localstack import jars

DEFAULT_LOGS = jars.LIB_ROOT / "matrix"
# pytest's closing line, e.g. "==== 3 failed, 1790 passed, 2 errors in 1612.30s (0:26:52) ===="
_CLOSING = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s")
_COUNT = re.compile(r"(\d+) (\w+)")
_PLURALS = {"errors": "error"}  # "1 error", "2 errors": one key
_NOT_OUTCOMES = {"warning", "warnings", "deselected"}  # said beside the tests' outcomes, not one


@dataclass
class Outcome:
    """One release's run: its exit status, pytest's counts, what its jars lack."""

    release: str
    returncode: int
    counts: dict[str, int] = field(default_factory=dict)
    lacks: list[str] = field(default_factory=list)
    error: str | None = None  # its jars could not be fetched: the run did not start

    def line(self) -> str:
        """The summary's line for this release."""
        if self.error is not None:
            return f"Kafka {self.release:<7} NOT RUN: {self.error.splitlines()[0]}"
        counts = {"passed": 0, "failed": 0, **self.counts}
        said = ", ".join(f"{n} {what}" for what, n in counts.items())
        verdict = "ok" if self.returncode == 0 else f"FAILED (exit {self.returncode})"
        lacking = "".join(f"\n    lacks: {m}" for m in self.lacks)
        return f"Kafka {self.release:<7} {verdict}: {said}{lacking}"


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last closing line in ``output`` (``error`` for ``errors``)."""
    found: dict[str, int] = {}
    for line in output.splitlines():
        closing = _CLOSING.match(line.strip())
        if closing:
            counted = _COUNT.findall(closing[1])
            found = {_PLURALS.get(what, what): int(n) for n, what in counted if what not in _NOT_OUTCOMES}
    return found


def run_release(release: str, command: list[str], logs: Path) -> Outcome:
    """Fetch the release's jars, then run ``command`` with it, shown and kept in its log."""
    try:
        lib = jars.ensure_jars(version=release)
    except jars.StackError as exc:
        return Outcome(release, 1, error=str(exc))
    lacks = [m.line() for m in jars.missing_parts(lib)]
    for line in lacks:
        print(line, flush=True)
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, jars.ENV: release}
    kept: list[str] = []
    with (
        open(logs / f"{release}.log", "w") as log,
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc,
    ):
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
            kept.append(line)
    return Outcome(release, proc.returncode, pytest_counts("".join(kept[-200:])), lacks)


def releases(asked: str | None) -> list[str]:
    """The releases asked for (releases or lines, comma separated), else every supported line's."""
    if not asked:
        return list(jars.LINES.values())
    return [jars.selected({jars.ENV: item.strip()}) for item in asked.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    """Run the command once per release, then the summary; 1 if any release failed."""
    parser = argparse.ArgumentParser(prog="test-matrix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", help=f"comma separated (default: {', '.join(jars.LINES.values())})")
    parser.add_argument("--logs", type=Path, default=DEFAULT_LOGS, help="where each release's output is kept")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command (make test's pytest)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run: give it after --")
    try:
        wanted = releases(args.releases)
    except jars.StackError as exc:
        parser.error(str(exc))
    outcomes = []
    for release in wanted:
        print(f"\n===== Kafka {release}: {' '.join(command)}", flush=True)
        outcomes.append(run_release(release, command, args.logs))
    print(f"\n===== the suite per Kafka release (logs in {args.logs})")
    for outcome in outcomes:
        print(outcome.line())
    return 1 if any(o.returncode != 0 for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
