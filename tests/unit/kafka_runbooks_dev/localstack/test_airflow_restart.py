"""The test Airflow's scheduler restart finds standalone's scheduler and stops it alone.

Real processes shaped like ``airflow standalone``'s: a parent (running in the Airflow home)
with one child per component, the component's name last on its command line, and a parent
that never reaps a child that exited (standalone does not). Airflow itself is not needed to
check which process is stopped; the e2e test restarts a real scheduler.
"""

from __future__ import annotations

import subprocess
import sys

from kafka_runbooks_dev.localstack.airflow import AirflowLocal, _alive, _children, _stop_process
from tests.helpers import wait_until

STANDALONE = """
import subprocess, sys, time
for name in ("api-server", "scheduler"):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", name])
time.sleep(120)
"""


def test_the_scheduler_is_stopped_alone_and_an_unreaped_exit_counts_as_gone(tmp_path):
    standalone = subprocess.Popen([sys.executable, "-c", STANDALONE], cwd=tmp_path, start_new_session=True)
    airflow = AirflowLocal(tmp_path, port=1, dags_folders=tmp_path)
    airflow.pid_file.write_text(f"{standalone.pid}\n")
    airflow._proc = standalone  # as start() keeps it: stop() reaps it
    try:
        children = wait_until(
            lambda: (found := _children(standalone.pid)) and len(found) == 2 and found,
            30,
            0.1,
            "both components started",
        )
        scheduler = airflow._scheduler_pid()
        assert scheduler in children
        _stop_process(scheduler, 10)  # SIGTERM; the parent never reaps it: a zombie, gone all the same
        assert not _alive(scheduler)
        assert [c for c in children if _alive(c)] == [c for c in children if c != scheduler]
        assert airflow._scheduler_pid() is None  # no scheduler left to restart
    finally:
        airflow.stop(timeout=10)
    assert not _alive(standalone.pid) and not any(_alive(c) for c in children)
