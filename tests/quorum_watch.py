"""DescribeQuorum polled from outside while a controller is replaced (issue #28).

Shared by the integration test (the runbook's step class) and the e2e test (the DAG through
Airflow): both keep every answer and judge each one by the same majority rule, on the quorum
leader's own clock and the controllers' own fetch timeout (``caught_up``, the evidence room's
rule), never the test's.
"""

from __future__ import annotations

import threading

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.controller_replace.plan import caught_up, voter_ids
from kafka_runbooks.quorum import majority
from tests.helpers import create_topic


class QuorumWatch(threading.Thread):
    """DescribeQuorum every 200 ms from its own client: (voters, caught-up voters, leader) per answer."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.admin = ClusterAdmin({"bootstrap.servers": bootstrap}, timeout_s=5)
        self.answers: list[tuple[list[int], list[int], int]] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                q = self.admin.describe_quorum()
            except Exception as exc:  # an unanswered read is kept apart, never read as caught up
                self.errors.append(repr(exc))
                continue
            self.answers.append((voter_ids(q), sorted(caught_up(q)), q.leader_id))

    def stop(self) -> None:
        """End the polling and close its client (the answers stay)."""
        self.done.set()
        self.join(10)
        self.admin.close()

    def short_of_majority(self) -> list[tuple[list[int], list[int], int]]:
        return [a for a in self.answers if len(a[1]) < majority(len(a[0]))]


def created(bootstrap: str, topic: str) -> bool:
    """Create a one-partition topic: a metadata change the controller quorum must commit."""
    try:
        create_topic(bootstrap, topic, partitions=1, replication_factor=1)
    except Exception as exc:  # the controller may be electing a leader: try again
        return "already exists" in str(exc).lower() or "TOPIC_ALREADY_EXISTS" in str(exc)
    return True
