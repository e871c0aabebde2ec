"""Features asked of the cluster (issue #38): finalized levels decide, absent ones stay unknown."""

from __future__ import annotations

from kafka_runbooks.evidence import ClusterFeatures, no_elr_words

# what ApiVersions v3 answered on the local stack (Kafka 4.3.1, static quorum) and what a 4.0
# cluster with ELR off, a 3.9 dynamic quorum and a ZooKeeper-mode cluster answer
K431 = ClusterFeatures(
    {"metadata.version": 30, "eligible.leader.replicas.version": 1}, {"kraft.version": (0, 1)}
)
K40 = ClusterFeatures({"metadata.version": 22, "eligible.leader.replicas.version": 0}, {})
K39_DYNAMIC = ClusterFeatures({"metadata.version": 21, "kraft.version": 1}, {})
ZK = ClusterFeatures({}, {}, source="ApiVersions of zk:9092")


def test_what_each_cluster_has():
    assert (K431.has("kraft"), K431.has("elr"), K431.has("dynamic quorum")) == (True, True, False)
    assert (K40.has("elr"), K39_DYNAMIC.has("dynamic quorum"), K39_DYNAMIC.has("elr")) == (False, True, False)
    assert not ZK.has("kraft")


def test_a_refusal_names_the_feature_and_the_release_that_has_it():
    assert K431.refusal("kraft", "x") is None
    refusal = ZK.refusal("kraft", "unclean recovery")
    assert (
        "unclean recovery needs a KRaft cluster" in refusal
        and "ZooKeeper-mode clusters are not supported" in refusal
    )
    assert "finalizes none (ApiVersions of zk:9092)" in refusal
    assert "4.1" in K40.refusal("elr", "y")


def test_without_an_elr_the_words_say_unknown_never_none_clean():
    assert no_elr_words(K431) is None
    assert "keeps no record of clean replicas beyond the ISR" in no_elr_words(K40)
    assert "unknown" in no_elr_words(None)
