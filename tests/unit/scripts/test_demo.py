"""`make demo` / `make stop` (scripts/demo.py): KR_STACK_DIR is honoured (the stack, Airflow's home and
the runbooks' data dir all move with it), and stop says what it does."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

from kafka_runbooks_dev.localstack import LocalStack

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
    assert lines[0] == "stopping the alerting (Prometheus, Alertmanager, the on-call receivers)..."
    assert lines[1] == f"stopping Airflow ({stack_dir.resolve() / 'airflow'})..."
    assert lines[2].startswith(f"stopping the Kafka stack in {stack_dir.resolve()}")
    assert "nothing running" in lines[2] and lines[-1].startswith("demo stopped in")
    assert not (ROOT / ".stack" / "demo" / "my-stack").exists()
    assert not (stack_dir / "alerting").exists()  # stop makes no secrets


def _demo_module():
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_second_demo_in_another_folder_has_its_own_airflow_home_and_data_dir(tmp_path):
    """Two demos in two KR_STACK_DIRs shared .stack/airflow-demo (one Airflow database, one password)
    and .stack/data (one lease per cluster name, one set of run states): each now keeps them in its
    own folder, and the default stack keeps the folders it always had."""
    demo = _demo_module()
    one, two = LocalStack(home=tmp_path / "one"), LocalStack(home=tmp_path / "two")
    homes, data = set(), set()
    for stack in (one, two):
        airflow = demo.airflow_for(stack, 18080)
        assert airflow.home == stack.home / "airflow"
        assert airflow.env()["KAFKA_RUNBOOKS_DATA_DIR"] == str(stack.home / "data")
        homes.add(airflow.home)
        data.add(airflow.env()["KAFKA_RUNBOOKS_DATA_DIR"])
    assert len(homes) == 2 and len(data) == 2
    default = demo.demo_folders(ROOT / ".stack" / "demo")
    assert default.airflow_home == ROOT / ".stack" / "airflow-demo"
    assert default.data_dir == ROOT / ".stack" / "data"
