"""One zombie-aware process-group check for every launcher of the local stack (issue #26).

Airflow's, Celery's and Spark Connect's stops each had their own ``_group_alive``; only Celery's
knew that a group whose members are all zombies is gone (``killpg(pgid, 0)`` succeeds while a
zombie is in the group), so Airflow's (without its Popen at hand) and Spark Connect's waited
out their whole timeout, then SIGKILLed, for a group that had already exited. Real processes
here, in sessions of their own as the launchers start them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kafka_runbooks_dev import processes, spark_connect
from kafka_runbooks_dev.localstack import airflow, celery
from tests.helpers import wait_until

LAUNCHERS = {"airflow": airflow, "celery": celery, "spark_connect": spark_connect}


def _state(pid: int) -> str:
    fields = processes.stat_fields(pid)
    return fields[0] if fields else "gone"


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_every_launcher_waits_on_the_one_zombie_aware_check(launcher):
    """A group whose leader exited unreaped is gone for each launcher's stop; a group whose leader
    is a zombie while a process it started still runs is alive until that one ends too."""
    group_alive = LAUNCHERS[launcher].group_alive
    assert group_alive is processes.group_alive
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        wait_until(lambda: _state(leader.pid) == "Z", 30, what="the leader exited, not reaped")
        assert group_alive(leader.pid) is False
    finally:
        leader.wait()
    shell = subprocess.Popen(
        ["sh", "-c", "sleep 120 & echo $!; exit 0"], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    member = int(shell.stdout.readline())
    try:
        wait_until(lambda: _state(shell.pid) == "Z", 30, what="the shell exited, not reaped")
        assert group_alive(shell.pid) is True  # its sleep runs on in the group
        os.kill(member, signal.SIGKILL)
        wait_until(lambda: not group_alive(shell.pid), 30, what="the group gone once its sleep is killed")
    finally:
        if _state(member) not in ("gone", "Z", "X"):
            os.kill(member, signal.SIGKILL)
        shell.wait()
        shell.stdout.close()


def test_our_own_child_is_reaped_so_its_exit_is_seen_at_once():
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    wait_until(lambda: not processes.group_alive(child.pid, child), 30, what="the child's group gone")
    assert child.returncode == 0  # reaped by the check


def test_a_child_that_exits_between_the_reap_and_the_look_is_reaped_too():
    """The loaded suite's race: the first poll saw the child running, it exited before the look
    at the group; a group found gone leaves no unreaped child of ours."""
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    wait_until(lambda: _state(child.pid) == "Z", 30, what="the child exited, not reaped")
    real_poll, polls = child.poll, []

    def poll_first_too_early():
        polls.append(1)
        return None if len(polls) == 1 else real_poll()

    child.poll = poll_first_too_early
    assert processes.group_alive(child.pid, child) is False
    assert child.returncode == 0
