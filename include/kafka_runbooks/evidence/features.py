"""Which features this cluster has: asked of the cluster (ApiVersions), never inferred from a
release string.

A KRaft broker's ApiVersions answer (v3+) carries the features its release supports and the
levels the cluster finalized: ``metadata.version`` (present only on a KRaft cluster: a
ZooKeeper-mode cluster finalizes none), ``kraft.version`` (1: a dynamic quorum, KIP-853, whose
voters can be added and removed), ``eligible.leader.replicas.version`` (1: the controller keeps an
ELR, KIP-966). The same answer lists each RPC's versions (DescribeQuorum v2 names each voter's
directory, ElectLeaders v3 could designate a leader). A rule that needs a feature asks
:meth:`ClusterFeatures.refusal`; where a feature is absent, what it would have told stays unknown
(no ELR: "the cluster keeps no record of clean replicas", never "none are clean").
"""

from __future__ import annotations

from dataclasses import dataclass, field

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
ELR_VERSION = "eligible.leader.replicas.version"
DESCRIBE_QUORUM = 55
ELECT_LEADERS = 43

# what a runbook needs, how the cluster shows it, and the release that has it
NEEDS = {
    "kraft": (
        f"a KRaft cluster (the cluster finalizes {METADATA_VERSION})",
        "ZooKeeper-mode clusters are not supported: migrate to KRaft (Kafka 3.9 is the last release with the migration)",
    ),
    "dynamic quorum": (
        f"a dynamic KRaft quorum ({KRAFT_VERSION} finalized at 1 or more, KIP-853)",
        "Kafka 3.9 formatted with --initial-controllers, or 4.1+ upgraded with "
        "`kafka-features upgrade --feature kraft.version=1`",
    ),
    "elr": (
        f"eligible leader replicas ({ELR_VERSION} finalized at 1 or more, KIP-966)",
        "Kafka 4.0 with `kafka-features upgrade --feature eligible.leader.replicas.version=1`, on by default from 4.1",
    ),
}


@dataclass(frozen=True)
class ClusterFeatures:
    """One broker's ApiVersions answer: finalized feature levels, supported ranges, RPC versions."""

    finalized: dict[str, int]
    supported: dict[str, tuple[int, int]]
    apis: dict[int, tuple[int, int]] = field(default_factory=dict)
    source: str = ""

    def level(self, name: str) -> int | None:
        """The finalized level of ``name``; None when the cluster finalizes none (absent or 0 are
        told apart by :meth:`has`)."""
        return self.finalized.get(name)

    def has(self, need: str) -> bool:
        """Whether the cluster has what ``need`` (a key of ``NEEDS``) names."""
        if need == "kraft":
            return METADATA_VERSION in self.finalized
        if need == "dynamic quorum":
            return (self.level(KRAFT_VERSION) or 0) >= 1
        if need == "elr":
            return (self.level(ELR_VERSION) or 0) >= 1
        raise KeyError(need)

    def refusal(self, need: str, what: str) -> str | None:
        """Why ``what`` cannot run on this cluster (naming the feature and the release that has it),
        or None when the cluster has it."""
        if self.has(need):
            return None
        feature, release = NEEDS[need]
        seen = {k: v for k, v in sorted(self.finalized.items())} or "none"
        return f"{what} needs {feature}; this cluster finalizes {seen} ({self.source}): {release}"

    def api(self, key: int) -> tuple[int, int] | None:
        """(min, max) versions of RPC ``key`` the answering broker advertises; None if absent."""
        return self.apis.get(key)

    def as_dict(self) -> dict:
        """JSON-ready, for the health report, the Kafka page and decision records."""
        return {
            "finalized": dict(sorted(self.finalized.items())),
            "supported": {k: list(v) for k, v in sorted(self.supported.items())},
            "kraft": self.has("kraft"),
            "dynamic_quorum": self.has("dynamic quorum"),
            "elr": self.has("elr"),
            "describe_quorum_versions": list(self.api(DESCRIBE_QUORUM) or ()),
            "source": self.source,
        }


def no_elr_words(features: ClusterFeatures | None) -> str | None:
    """What to say where an ELR rule cannot speak: None when the cluster keeps an ELR."""
    if features is not None and features.has("elr"):
        return None
    if features is None:
        return "whether the cluster keeps an ELR is unknown (its features were not read)"
    return (
        f"the cluster keeps no record of clean replicas beyond the ISR ({ELR_VERSION} is not finalized): "
        "a replica outside the ISR may or may not hold every committed record"
    )
