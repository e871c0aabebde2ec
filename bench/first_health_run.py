"""Benchmark: a newcomer's first health report on the demo (issue #25: the Kafka page filled in
under a minute after ``make demo`` finishes).

    .venv/bin/python bench/first_health_run.py [--port 29450] [--port-base 29000]
        [--stack-dir .stack/demo-F] [--timeout 900]

Runs ``make demo`` itself (the same code path a newcomer runs: bootstrap, then
``scripts/demo.py start``) with the ports and folder moved through the variables the README
documents (``KR_AIRFLOW_PORT``, ``KR_STACK_PORT_BASE``, ``KR_STACK_DIR``), and notes when it
exits. Then it acts as the newcomer: logs in with the password ``make demo`` printed (the
token of ``POST /auth/token`` as the UI's ``_token`` cookie) and loads the Kafka page's own
document (``/kafka-console/``, what the UI's Kafka entry frames) every second until it shows a
health report's cluster figures instead of "No health report yet". It prints the seconds from
``make demo`` exiting to the page filled beside the 60 s target, the same rounded up to the
page's own 15 s self-refresh (what a newcomer who opened it at once sees), and the breakdown by
Airflow's own timestamps (each ``kafka_cluster_health`` run queued -> running -> ended, each task
queued -> running -> ended, the Spark analysis among them). It lists every port the demo's
processes listen on and flags any outside the moved ranges (a default port that did not move).
Finally ``make stop`` with the same variables, and it removes the folders the demo created.

It refuses to start when one of those folders exists already: the figure is a first run's,
and the folders are removed at the end. Run it alone (``flock /tmp/kr-stack.lock``): one
stack at a time on a small machine.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import requests

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 60.0
PAGE_REFRESH_S = 15  # kafka_runbooks.console.render_page's default: the page reloads itself
HEALTH_DAG = "kafka_cluster_health"
STACK_PORT_SPAN = 400  # the stack's ports lie in base .. base + 400 (README, "Ports")


@dataclass
class Demo:
    """What ``make demo`` printed, and when it exited (this process's monotonic clock)."""

    rc: int
    exited_at: float
    lines: list[str] = field(default_factory=list)

    def value(self, pattern: str) -> str:
        for line in self.lines:
            found = re.search(pattern, line)
            if found:
                return found.group(1)
        raise SystemExit(f"`make demo` did not print {pattern!r}")


def demo_env(args) -> dict[str, str]:
    """The newcomer's environment with the ports and the stack folder moved, as the README says."""
    env = dict(os.environ)
    env.update(
        KR_AIRFLOW_PORT=str(args.port),
        KR_STACK_PORT_BASE=str(args.port_base),
        KR_STACK_DIR=str(args.stack_dir),
    )
    return env


def demo_folders(stack_dir: Path) -> list[Path]:
    """Every folder ``make demo`` writes besides the shared jars (scripts/demo.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import demo

    folders = demo.demo_folders(stack_dir)
    return [folders.stack, folders.airflow_home, folders.data_dir]


def run_make(target: str, env: dict[str, str], started: float) -> Demo:
    """``make -s target``, its output echoed with the seconds since ``started``."""
    proc = subprocess.Popen(
        ["make", "-s", target], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        print(f"[{time.monotonic() - started:6.1f}s] {line}", end="", flush=True)
    rc = proc.wait()
    return Demo(rc=rc, exited_at=time.monotonic(), lines=lines)


def log_in(base_url: str, password: str) -> requests.Session:
    """A session carrying the UI's ``_token`` cookie, as the browser has after logging in (and the
    same token as a bearer header, for the breakdown's REST calls)."""
    session = requests.Session()
    resp = session.post(
        f"{base_url}/auth/token", json={"username": "admin", "password": password}, timeout=60
    )
    resp.raise_for_status()
    token = resp.json()["access_token"]
    session.cookies.set("_token", token)  # the page's own document reads it
    session.headers["Authorization"] = f"Bearer {token}"  # the REST API reads this (the UI's JS sends it)
    return session


def page_filled(session: requests.Session, base_url: str) -> bool:
    """True once the Kafka page shows a health report's figures (a section with its count
    tiles), not the "No health report yet" placeholder; any error or slow answer: not yet."""
    try:
        resp = session.get(f"{base_url}/kafka-console/", timeout=30)
    except requests.RequestException:
        return False
    html = resp.text if resp.status_code == 200 else ""
    return (
        "id='no-health'" not in html and "<section class='health'" in html and "data-count='offline'" in html
    )


def wait_filled(session: requests.Session, base_url: str, timeout: float) -> float:
    """The monotonic time the page was first seen filled (polled every second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if page_filled(session, base_url):
            return time.monotonic()
        time.sleep(1.0)
    raise SystemExit(f"the Kafka page had no health report {timeout:.0f}s after `make demo` finished")


def _at(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _span(a: str | None, b: str | None) -> str:
    start, end = _at(a), _at(b)
    return f"{(end - start).total_seconds():6.1f}s" if start and end else "     ? "


def print_breakdown(session: requests.Session, base_url: str) -> None:
    """Each health run and its tasks, by Airflow's own timestamps (one machine, one clock)."""
    api = f"{base_url}/api/v2/dags/{HEALTH_DAG}/dagRuns"
    runs = session.get(api, params={"order_by": "id"}, timeout=60).json()["dag_runs"]
    for run in runs:
        print(
            f"run {run['dag_run_id']} ({run['run_type']}, {run['state']}): queued->running "
            f"{_span(run['queued_at'], run['start_date'])}, running->ended {_span(run['start_date'], run['end_date'])}"
        )
        tis = session.get(f"{api}/{quote(run['dag_run_id'], safe='')}/taskInstances", timeout=60).json()
        tis = tis["task_instances"]
        for ti in sorted(tis, key=lambda t: t.get("start_date") or "~"):
            name = ti["task_id"] + (f"[{ti['map_index']}]" if ti["map_index"] >= 0 else "")
            print(
                f"    {name:36} {ti['state'] or '-':8} run start->queued {_span(run['start_date'], ti.get('queued_when'))}"
                f"  queued->running {_span(ti.get('queued_when'), ti.get('start_date'))}"
                f"  running->ended {_span(ti.get('start_date'), ti.get('end_date'))}"
            )


def listening(owners: list[Path]) -> list[tuple[int, str, int, str]]:
    """(port, address, pid, command) of every listening TCP socket whose process names one of
    ``owners`` in its command line or environment (the demo's stack, Airflow and Spark)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        cols = line.split()
        address, port = cols[3].rsplit(":", 1)
        for pid in {int(p) for p in re.findall(r"pid=(\d+)", line)}:
            if _owned_by(pid, owners):
                found.append((int(port), address, pid, _command(pid)))
    return sorted(set(found))


def _owned_by(pid: int, owners: list[Path]) -> bool:
    """Its command line or environment names an owner folder (the stack's JVMs, Spark), or it runs in
    the session of the ``airflow standalone`` whose pid file is in one (Airflow's components set
    their process titles over their command lines and environments)."""
    try:
        text = b"".join(Path(f"/proc/{pid}/{f}").read_bytes() for f in ("cmdline", "environ"))
        session = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return False
    standalone = [_pid_in(owner / "standalone.pid") for owner in owners]
    return session in standalone or any(str(owner).encode() in text for owner in owners)


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [w.decode(errors="replace") for w in argv if w]
    main = next((w for w in words if w.startswith(("kafka.", "org.apache"))), "")
    return " ".join(words[:2])[:60] + (f" .. {main}" if main else "")


def check_ports(ports: list[tuple[int, str, int, str]], args) -> list[int]:
    """Print each port; return those outside the moved ranges (the stack's base .. base+400,
    Airflow's port and its log servers' +1, +2)."""
    allowed = set(range(args.port_base, args.port_base + STACK_PORT_SPAN + 1)) | {
        args.port,
        args.port + 1,
        args.port + 2,
    }
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    stray = []
    for port, address, pid, command in ports:
        ephemeral = low <= port <= high  # bound to port 0: the OS picked it
        note = (
            "" if port in allowed else "   (ephemeral: the OS chose it)" if ephemeral else "   <- NOT MOVED"
        )
        stray += [port] if note.endswith("NOT MOVED") else []
        print(f"  {address}:{port:<6} pid {pid:<7} {command}{note}")
    return stray


def report(demo: Demo, filled_at: float, stray: list[int]) -> None:
    waited = filled_at - demo.exited_at
    seen = math.ceil(waited / PAGE_REFRESH_S) * PAGE_REFRESH_S
    verdict = "met" if waited < TARGET_S else "NOT met"
    print(f"\n`make demo` finished -> Kafka page filled: {waited:.1f}s (target < {TARGET_S:.0f}s: {verdict})")
    print(
        f"  as the page's {PAGE_REFRESH_S} s self-refresh shows it to a newcomer who opened it at once: {seen}s"
    )
    print(f"  ports not moved: {stray or 'none'}")


def remove(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"removed {folder}")


def measure(args, env: dict[str, str], started: float, folders: list[Path]) -> None:
    demo = run_make("demo", env, started)
    print(f"`make demo` exited with {demo.rc} after {demo.exited_at - started:.1f}s")
    if demo.rc != 0:
        raise SystemExit("`make demo` failed")
    base_url = demo.value(r"Airflow UI:\s+(\S+)")
    print("listening (the demo's processes):")
    stray = check_ports(listening(folders[:2]), args)
    session = log_in(base_url, demo.value(r"password:\s+(\S+)"))
    filled_at = wait_filled(session, base_url, args.timeout)
    report(demo, filled_at, stray)
    print_breakdown(session, base_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=29450)
    parser.add_argument("--port-base", type=int, default=29000)
    parser.add_argument("--stack-dir", type=Path, default=ROOT / ".stack" / "demo-F")
    parser.add_argument("--timeout", type=float, default=900.0, help="for the page to fill, after the demo")
    args = parser.parse_args()
    args.stack_dir = args.stack_dir.resolve()
    folders = demo_folders(args.stack_dir)
    existing = [f for f in folders if f.exists()]
    if existing:
        raise SystemExit(
            f"not a first run: {', '.join(map(str, existing))} exist (stop and remove that demo first)"
        )
    env, started = demo_env(args), time.monotonic()
    try:
        measure(args, env, started, folders)
    finally:
        stop = run_make("stop", env, time.monotonic())
        print(f"`make stop` exited with {stop.rc}")
        remove(folders)


if __name__ == "__main__":
    main()
