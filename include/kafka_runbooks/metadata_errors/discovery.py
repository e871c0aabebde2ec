"""Which nodes to sweep: the cluster's own answer, plus every node the connection names.

Brokers come from DescribeCluster (fenced ones included: a broker that cannot apply
metadata may well be fenced). Controllers are not in DescribeCluster: they are the
voters of DescribeQuorum (observers are brokers, or controllers that are not voters).
A node the metrics connection names explicitly is swept even when the cluster does not
report it, so a failed discovery still leaves the configured nodes watched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_runbooks.admin import ClusterAdmin

BROKER = "broker"
CONTROLLER = "controller"


@dataclass
class NodeRef:
    node_id: int
    roles: set[str] = field(default_factory=set)
    host: str | None = None
    sources: set[str] = field(default_factory=set)

    @property
    def is_controller(self) -> bool:
        """Whether the node has the controller role (a combined node has both)."""
        return CONTROLLER in self.roles


@dataclass
class Discovery:
    nodes: dict[int, NodeRef]
    quorum_leader: int | None
    errors: list[str]


def discover(admin: ClusterAdmin, configured_ids: list[int]) -> Discovery:
    """Nodes from the cluster (``admin``: the ClusterAdmin facade, may be None) and the config."""
    nodes: dict[int, NodeRef] = {}
    errors: list[str] = []
    leader: int | None = None

    def node(node_id: int) -> NodeRef:
        """The node's entry, created on first mention."""
        return nodes.setdefault(node_id, NodeRef(node_id))

    unreachable = False
    if admin is not None:
        from kafka_runbooks.errors import ClusterUnreachable

        try:
            for broker in admin.describe_brokers().values():
                ref = node(broker.broker_id)
                ref.roles.add(BROKER)
                ref.host = ref.host or broker.host
                ref.sources.add("DescribeCluster")
        except Exception as exc:  # report and go on with what else is known
            errors.append(f"DescribeCluster failed: {type(exc).__name__}: {exc}")
            # no broker answered: asking again for the quorum would only wait as long again
            unreachable = isinstance(exc, ClusterUnreachable)
    if admin is not None and not unreachable:
        try:
            quorum = admin.describe_quorum()
            leader = quorum.leader_id if quorum.leader_id >= 0 else None
            for voter in quorum.voters:
                ref = node(voter.node_id)
                ref.roles.add(CONTROLLER)
                ref.host = ref.host or quorum.hosts.get(voter.node_id)
                ref.sources.add("DescribeQuorum voter")
            for observer in quorum.observers:
                ref = node(observer.node_id)
                ref.host = ref.host or quorum.hosts.get(observer.node_id)
                ref.sources.add("DescribeQuorum observer")
        except Exception as exc:
            errors.append(f"DescribeQuorum failed: {type(exc).__name__}: {exc}")
    for node_id in configured_ids:
        node(node_id).sources.add("configured")
    return Discovery(dict(sorted(nodes.items())), leader, errors)
