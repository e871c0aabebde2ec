"""`make demo` / `make stop` (scripts/demo.py): KR_STACK_DIR is honoured, and stop says what it does."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stop_uses_kr_stack_dir_and_says_what_it_stops(tmp_path):
    stack_dir = tmp_path / "my-stack"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "stop", "--port", str(_free_port())],
        env={"PATH": "/usr/bin:/bin", "KR_STACK_DIR": str(stack_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("stopping Airflow")
    assert lines[1].startswith(f"stopping the Kafka stack in {stack_dir.resolve()}")
    assert "nothing running" in lines[1] and lines[-1].startswith("demo stopped in")
    assert not (ROOT / ".stack" / "demo" / "my-stack").exists()
