"""Is a process group still running? One answer for every launcher of the local stack.

Airflow standalone, the Celery components and the Spark Connect server each run in a process
group of their own, and stopping one means waiting until its group is gone. ``killpg(pgid, 0)``
alone cannot tell: it succeeds while any member exists, and a member that exited but was not
reaped (a zombie: our own child until we wait for it, or standalone's components, which it
never reaps) still exists. So the group is alive only while a member is running; a group whose
leader is a zombie and whose other members are gone is not alive, and one whose leader is a
zombie while a child it started still runs is alive (that child is what the stop waits for).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GONE_STATES = ("Z", "X")  # zombie (exited, not reaped), dead


def stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (in parentheses, it may hold spaces):
    [state, ppid, pgrp, ...]; [] when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def group_alive(pgid: int, child: subprocess.Popen | None = None) -> bool:
    """Does a running (not zombie) process remain in group ``pgid``? ``child``, when the group's
    leader is our own child, is reaped first, so its exit is seen at once; and again once the
    group is found gone, since it may have exited between that first reap and the look (a
    gone group leaves no unreaped child of ours behind)."""
    if child is not None:
        child.poll()
    alive = _members_alive(pgid)
    if not alive and child is not None:
        child.poll()
    return alive


def _members_alive(pgid: int) -> bool:
    """Whether group ``pgid`` has a member that is not a zombie (``killpg`` counts zombies)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member we may not signal exists: look at the members
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in GONE_STATES:
                return True
    return False
