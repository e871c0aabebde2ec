"""The compatibility lane: the runbooks' real-stack tests marked ``compat`` run again on the
oldest and the newest supported Kafka release, beside the session's own (``--kafka-compat``,
which ``make test`` passes; docs/testing.md, "The compatibility lane").

A marked test gets one instance per release: ``[kafka-4.3.1]`` on the session's stack (the
release ``KR_KAFKA_VERSION`` picks) and a copy per other release, ``[kafka-3.9.2]`` and
``[kafka-4.4.0]``, each on a stack of that release (``tests/integration/conftest.py``: one stack
per release and shape, started on its first copy, stopped after its last). Each release's copies
run together, in the lane :data:`LANE_OF_RELEASE` gives it: both at the end of the ``stack`` lane
(after the integration tests, where nothing else needs its stack), the oldest first, one release's
stack at a time. The ``airflow`` lane was the longer one by ~230 s (Dec 3: its Airflow, the e2e
tests and Celery against unit, Spark and integration), so it no longer starts with the newest
release's copies (~130 s).

``@pytest.mark.compat(needs=jars.FILE_CONNECTORS)`` makes copies only for the releases whose jars
have that part (the file connectors are not served for 4.4.0: its Connect copies would fail at
their set-up, naming it, every run).
"""

from __future__ import annotations

import re

import pytest

from kafka_runbooks_dev.localstack import jars

MARKER = "compat"
RELEASE_ARG = "kafka_release"
_ID = re.compile(r"\[(?:[^\]]*-)?kafka-(\d+\.\d+\.\d+)(?:-[^\]]*)?\]$")
# the supported lines' pinned releases, oldest first
_PINNED = tuple(jars.LINES.values())
# where each release's copies run (tests/conftest.py's lanes), and whether first or last there
LANE_OF_RELEASE = {_PINNED[0]: "stack", _PINNED[-1]: "stack"}
# what a marked test's copies were not made for, and why (said in the run's summary)
LEFT_OUT: list[str] = []


def session_release() -> str:
    """The release of the session's stacks (``KR_KAFKA_VERSION``, else the pinned one)."""
    return jars.selected()


def releases() -> list[str]:
    """The releases the marked tests are copied to: the oldest and newest supported, but the
    session's own (its instance is the test itself)."""
    here = session_release()
    return [release for release in LANE_OF_RELEASE if release != here]


def copies_for(marker: pytest.Mark) -> tuple[list[str], list[str]]:
    """The releases a marked test is copied to, and what the others lack that it ``needs``."""
    needs = marker.kwargs.get("needs")
    made, lacking = [], []
    for release in releases():
        missing = jars.lacks(jars.ensure_jars(version=release), needs) if needs else None
        if missing is None:
            made.append(release)
        else:
            lacking.append(missing.line())
    return made, lacking


def instance_id(release: str | None) -> str:
    """The instance's id: the release it runs on (None: the session's)."""
    return f"kafka-{release or session_release()}"


def release_of(nodeid: str) -> str | None:
    """The release a copy's node id names; None for anything else (the session's instance too)."""
    found = _ID.search(nodeid)
    release = found.group(1) if found else None
    return release if release in LANE_OF_RELEASE and release != session_release() else None


def item_release(item: pytest.Item) -> str | None:
    """The release a copy runs on; None for every other test."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(RELEASE_ARG) if callspec is not None else None


def order_in_stage(item: pytest.Item) -> tuple[int, int]:
    """Where an item goes within its stage: a copy at the end of it, its release's copies
    together, those on its release's default stack before those on the JBOD stack, then the
    dynamic quorum's (one extra stack at a time)."""
    release = item_release(item)
    if release is None:
        return (0, 0)
    names = getattr(item, "fixturenames", ())
    shape = 2 if "dynamic_stack" in names else 1 if "jbod_stack" in names else 0
    return (1, _PINNED.index(release) * 10 + shape)
