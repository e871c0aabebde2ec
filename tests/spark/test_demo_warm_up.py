"""`make demo` warms its new Spark Connect server up before the first report's run needs it.

A fresh server's first health analysis pays for the JVM's warm-up: in ``make demo`` on the
loaded machine it took 142 s of the 189 s a newcomer waited for the Kafka page
(bench/first_health_run.py). ``scripts/demo.py`` runs the same analysis once on the demo's
own cluster while Airflow starts. Its failure is only said (the demo goes on, slower), so
this test is what notices a warm-up that stopped working: on the real session stack and the
session's real Connect server, it runs, counts the cluster's partitions as the health job
does, and leaves nothing behind in the stack's folder.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _demo():
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_warm_up_runs_the_health_analysis_on_the_demo_cluster_and_leaves_nothing(
    local_stack, spark_connect, admin
):
    partitions = len(admin.read_state(include_log_dirs=False).partitions)

    warm = _demo().warm_up_spark(local_stack, spark_connect.url)

    # the lane runs its tests one after another: nothing changes the stack in between
    assert warm.partitions == partitions > 0
    assert not (local_stack.home / "spark-warm-up").exists()
