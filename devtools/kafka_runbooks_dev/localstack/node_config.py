"""Each local stack node's properties: a broker's, a controller's, a Connect worker's.

Out of :class:`~kafka_runbooks_dev.localstack.stack.LocalStack` so the class keeps to its jobs
(processes, readiness, lifecycle). A stack of ``Topology(security="sasl_ssl")`` gets the same
properties with its listeners, authentication and authorizer rewritten by :mod:`.security`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_runbooks_dev.localstack import security
from kafka_runbooks_dev.localstack.topology import CONNECT, CONTROLLER, LOOPBACK, Node

if TYPE_CHECKING:  # the stack imports this module: a type only, no import at run time
    from kafka_runbooks_dev.localstack.stack import LocalStack

# fast failure detection on the stack: 1 s heartbeats, a 6 s session (Kafka's default is 9 s), set
# alike on brokers and controllers: the controllers enforce it, the runbooks read it from the brokers
BROKER_SESSION_TIMEOUT_MS = "6000"
CONNECT_STATUS_TOPIC = "connect-status"  # the workers' status.storage.topic (restarts read it back)


def properties(stack: LocalStack, node: Node) -> dict[str, str]:
    """The node's server.properties: a Connect worker's, a controller's or a broker's (secured on a
    secured stack)."""
    if node.role == CONNECT:
        plain = connect_properties(stack, node)
    elif node.role == CONTROLLER:
        # With ELR (KIP-966) the controllers publish their min.insync.replicas as the
        # cluster-wide dynamic default, which beats the brokers' static setting.
        plain = {
            **kraft_properties(stack, node),
            "process.roles": "controller",
            "listeners": f"CONTROLLER://{node.address}",
            "min.insync.replicas": str(min(2, stack.topology.brokers)),
            "broker.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS,
        }
    else:
        plain = broker_properties(stack, node)
    return security.secured(stack, node, plain) if stack.topology.secured else plain


def connect_properties(stack: LocalStack, node: Node) -> dict[str, str]:
    """A distributed Connect worker on the stack's brokers, its topics at RF min(3, brokers)."""
    rf = str(min(3, stack.topology.brokers))
    return {
        "bootstrap.servers": stack.topology.bootstrap_servers,
        "group.id": "kafka-runbooks-connect",
        "listeners": f"http://{node.address}",
        "rest.advertised.host.name": LOOPBACK,
        "rest.advertised.port": str(node.port),
        "plugin.path": str(stack.lib_dir / "connect-plugins"),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": "connect-configs",
        "offset.storage.topic": "connect-offsets",
        "status.storage.topic": CONNECT_STATUS_TOPIC,
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "offset.flush.interval.ms": "2000",
    }


def kraft_properties(stack: LocalStack, node: Node) -> dict[str, str]:
    """What a KRaft broker and controller share: id, quorum (static voters or dynamic), dirs."""
    topo = stack.topology
    return {
        "node.id": str(node.node_id),
        **(
            {"controller.quorum.bootstrap.servers": topo.quorum_bootstrap_servers}
            if topo.dynamic_quorum
            else {"controller.quorum.voters": topo.quorum_voters}
        ),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": ",".join(str(d) for d in stack.log_dirs(node)),
    }


def broker_properties(stack: LocalStack, node: Node) -> dict[str, str]:
    """A broker with production-like durability (min ISR 2, no unclean election) and fast
    failure detection (1 s heartbeats, 6 s session), then the topology's own overrides."""
    topo = stack.topology
    min_isr = str(min(2, topo.brokers))
    rf = str(min(3, topo.brokers))
    return {
        **kraft_properties(stack, node),
        "process.roles": "broker",
        "listeners": f"PLAINTEXT://{node.address}",
        "advertised.listeners": f"PLAINTEXT://{node.address}",
        "inter.broker.listener.name": "PLAINTEXT",
        "broker.rack": node.rack or "",
        "min.insync.replicas": min_isr,
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "unclean.leader.election.enable": "false",
        "auto.create.topics.enable": "false",
        "num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS,
        "replica.lag.time.max.ms": "10000",
        **topo.broker_settings,
    }
