"""A real Kafka stack (KRaft controllers, brokers, one Connect worker) on loopback.

Runs Apache Kafka from the jars Maven Central publishes, with the Prometheus JMX
exporter agent on every node, so tests, the demo and benchmarks exercise real brokers.
"""

from kafka_runbooks_dev.localstack.stack import LocalStack, NodeStatus
from kafka_runbooks_dev.localstack.topology import Node, Topology

__all__ = ["LocalStack", "Node", "NodeStatus", "Topology"]
