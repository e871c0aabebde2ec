"""How the roll reads one node: ready or not, its restart evidence, its log recovery counts.

Readiness is the roller's own definition (a broker registered, unfenced, answering a request
itself and, with a probe, RUNNING; a controller caught up with the quorum by the leader's clock); evidence is what a
restart must change; recovery counts are remembered because their sources come and go,
and an unknown count is said to be unknown, never 0.
"""

from __future__ import annotations

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.probes import BrokerStateReading
from kafka_runbooks.restart.progress import CONTROLLER, NodeProgress, NodeWork, ms_text
from kafka_runbooks.restart.quorum import QuorumReadings
from kafka_runbooks.restart.safety import with_reassignments


class NodeObserver(NodeWork):
    """Reads a node through the admin client, the restart back end and the probe; acts on nothing."""

    def __init__(
        self, admin: ClusterAdmin, backend, probe, quorum: QuorumReadings, clock=None, logger=None
    ) -> None:
        super().__init__(clock, logger)
        self.admin = admin
        self.backend = backend
        self.probe = probe
        self.quorum = quorum

    def observe(
        self, node_id: int, role: str, past_offset: int | None = None
    ) -> tuple[bool, dict, BrokerStateReading | None]:
        """Is the node ready (the roller's own definition), with the facts and the probe reading.

        A controller is ready when the evidence room judges it caught up (its fetch and catch-up
        within the cluster's fetch timeout, by the leader's clock) and, after a restart, fetching
        past ``past_offset`` (the
        leader's log end offset once the new process was seen): DescribeQuorum keeps the
        old process's caught-up time for a while after it is gone.
        """
        running = self.backend.is_running(node_id)
        if role == CONTROLLER:
            ready, facts = self.quorum.readiness(node_id, running, past_offset)
            return ready, facts, None
        brokers = self.admin.describe_brokers()
        broker = brokers.get(node_id)
        registered = bool(broker and broker.available)
        # DescribeCluster shows a crashed process's registration unfenced until its session times
        # out (a restart's new process is refused registration meanwhile); only the broker itself
        # answering on its listener, which it opens once unfenced, says its current process serves
        silent = self.admin.broker_answers(node_id) if registered and running is not False else "not asked"
        reading = self.probe.read(node_id) if self.probe is not None else None
        facts = {
            "process_running": running,
            "registered_unfenced": registered,
            "answers_itself": silent is None or silent,
            "broker_state": reading.as_dict() if reading else None,
        }
        # With a probe, only a RUNNING reading is ready: a probe that cannot answer may be a
        # new JVM whose exporter is not up yet, while stale metadata still shows the crashed
        # process registered and unfenced (seen on the real stack); acting then would restart
        # a broker that is about to load its logs.
        state_ok = reading is None or (reading.known and reading.running)
        return bool(registered and silent is None and state_ok and running is not False), facts, reading

    def evidence(self, node_id: int, reading: BrokerStateReading | None) -> dict:
        """The back end's evidence plus the exporter's process start time, if it has one."""
        try:
            evidence = dict(self.backend.evidence(node_id) or {})
        except Exception as exc:  # evidence is read, never trusted to be there
            evidence = {"error": f"{type(exc).__name__}: {exc}"}
        if reading is None and self.probe is not None:
            try:
                reading = self.probe.read(node_id)
            except Exception:  # a probe never raises; a foreign one might
                reading = None
        if reading is not None and reading.process_start_ms is not None:
            evidence["process_start_ms"] = reading.process_start_ms
        return evidence

    def remember_counts(self, node: NodeProgress, reading: BrokerStateReading | None) -> None:
        """Keep the recovery counts a source reported, with when: the sources come and go, and a
        later message says what was last seen rather than "unknown" or 0."""
        if reading is not None and reading.counts_known:
            node.last_counts = {
                "remaining_logs_to_recover": reading.remaining_logs,
                "remaining_segments_to_recover": reading.remaining_segments,
                "source": reading.source,
                "at_ms": self.clock(),
            }

    def counts_text(self, node: NodeProgress, reading: BrokerStateReading | None) -> str:
        """Counts now, else the last ones any source reported, else "unknown"; never "0"."""
        if reading is not None and reading.counts_known:
            return reading.recovery_text()
        if node.last_counts:
            ago = (self.clock() - node.last_counts["at_ms"]) / 1000
            return (
                f"recovery counts unknown now; last seen {ago:.0f}s ago: "
                f"{ms_text(node.last_counts['remaining_logs_to_recover'])} logs and "
                f"{ms_text(node.last_counts['remaining_segments_to_recover'])} segments still to recover"
            )
        return "recovery counts unknown (no source reports them)"

    def starting_headline(self, node: NodeProgress, reading: BrokerStateReading | None) -> str:
        """ "is in log recovery" when counts say logs or segments remain (now or last seen), else
        "is starting": the run's failure message names which."""
        if (reading is not None and reading.recovering) or any(
            (node.last_counts.get(k) or 0) > 0
            for k in ("remaining_logs_to_recover", "remaining_segments_to_recover")
        ):
            return "is in log recovery"
        return "is starting"

    def cluster_state(self):
        """The cluster as the roll judges it: metadata and ISRs (no log dirs), with the reassignments in flight."""
        return with_reassignments(
            self.admin.read_state(include_log_dirs=False), self.admin.list_reassignments()
        )
