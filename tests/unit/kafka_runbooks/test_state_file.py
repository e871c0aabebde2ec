"""State files' entries read back by field name (kafka_runbooks.state_file.StateEntry)."""

from __future__ import annotations

from dataclasses import dataclass

from kafka_runbooks.failed_broker.failures import FailedBroker
from kafka_runbooks.failed_broker.offline_dirs import OfflineDir
from kafka_runbooks.state_file import StateEntry


@dataclass
class Seen(StateEntry):
    broker_id: int
    first_seen_ms: int | None = None


def test_an_entry_written_by_an_older_or_newer_version_still_loads():
    """A field this version does not know is dropped, a missing one is None: the sweep keeps its
    memory (its countdowns) across an upgrade or a downgrade."""
    assert Seen.from_dict({"broker_id": 4, "first_seen_ms": 5, "written_by_a_newer_version": 1}) == Seen(4, 5)
    assert Seen.from_dict({"broker_id": 4}) == Seen(4, None)


def test_both_sweeps_entries_are_read_the_same_way():
    """The failed brokers' and the offline dirs' files share the one reader."""
    assert issubclass(FailedBroker, StateEntry) and issubclass(OfflineDir, StateEntry)
    assert FailedBroker.from_dict({"broker_id": 4, "first_seen_ms": 1, "extra": 0}) == FailedBroker(4, 1)
    assert OfflineDir.from_dict({"broker_id": 4, "log_dir": "/d", "first_seen_ms": 1}).key == "4:/d"
