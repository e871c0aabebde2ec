"""The one room that judges what the cluster says.

Every question a runbook, a sweep or the Kafka page decides on is answered here, from Kafka's
own answers, in Kafka's terms, with thresholds read from the cluster's own settings:

- **does this broker serve now** (:mod:`.serving`): its own answer on its own listener, never
  DescribeCluster's registration or the ISR alone;
- **is this voter caught up now** (:mod:`.catch_up`): its last fetch and its last catch-up in the
  same DescribeQuorum answer, by the leader's clock, within ``controller.quorum.fetch.timeout.ms``;
- **does this replica hold every committed record** (:mod:`.replicas`): ISR or ELR only; the last
  known ELR is a hint for an unclean choice, never clean;
- **is this broker's replica on a failed log dir** (:mod:`.replica_dirs`): healthy only with its
  current (never a future) log in an online dir and the controller's offline replicas not naming
  the broker; where the broker's DescribeLogDirs and the controller disagree, offline;
- **is this evidence newer than that action, how long since X** (:mod:`.clock`): one clock, the
  clock that stamped both ends, or unknown;
- **how long must a settle hold** (:mod:`.settle`): never shorter than ``broker.session.timeout.ms``,
  its last read asking the nodes themselves;
- **the thresholds** (:mod:`.settings`): read from the cluster, never a constant in a runbook;
- **which features the cluster has** (:mod:`.features`): finalized levels and RPC versions from
  ApiVersions, never a release string; an absent feature leaves its rule unknown.

"Unknown" stays unknown in every rule: an answer that cannot tell is never read as the
comfortable answer. ``tests/unit/kafka_runbooks/evidence/test_one_room.py`` fails when a decision
reads the raw fields these rules judge (a fenced flag, a quorum timestamp, the last known ELR,
the controller's offline replicas of a partition) anywhere else.
"""

from kafka_runbooks.evidence.catch_up import CAUGHT_UP, NOT_CAUGHT_UP, UNKNOWN, CatchUp, FetchMark, QuorumView
from kafka_runbooks.evidence.clock import AIRFLOW_API_SERVER, WORKER, Stamp, after, age_ms, newer_than
from kafka_runbooks.evidence.features import ClusterFeatures, no_elr_words
from kafka_runbooks.evidence.replica_dirs import ReplicaDirs, judge_replica_dirs
from kafka_runbooks.evidence.replicas import committed_holders, eligible_leader_replicas, last_known_elr
from kafka_runbooks.evidence.serving import serving, silent_brokers
from kafka_runbooks.evidence.settings import ClusterTimeouts, read_timeouts, timeouts_from
from kafka_runbooks.evidence.settle import hold_then_ask, settle_period_s

__all__ = [
    "AIRFLOW_API_SERVER",
    "CAUGHT_UP",
    "NOT_CAUGHT_UP",
    "UNKNOWN",
    "WORKER",
    "CatchUp",
    "ClusterFeatures",
    "FetchMark",
    "ClusterTimeouts",
    "QuorumView",
    "ReplicaDirs",
    "Stamp",
    "after",
    "age_ms",
    "committed_holders",
    "eligible_leader_replicas",
    "hold_then_ask",
    "judge_replica_dirs",
    "last_known_elr",
    "newer_than",
    "no_elr_words",
    "read_timeouts",
    "serving",
    "settle_period_s",
    "silent_brokers",
    "timeouts_from",
]
