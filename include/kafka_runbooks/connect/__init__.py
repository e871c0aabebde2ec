"""Kafka Connect: a REST client, the auto-restart back-off policy, its state, and the sweep."""

from kafka_runbooks.connect.client import (
    ConnectClient,
    ConnectError,
    ConnectorStatus,
    ConnectUnreachable,
    RebalanceInProgress,
    RestartOutcome,
    UnaddressableConnector,
    UnknownConnector,
    UnknownTask,
)
from kafka_runbooks.connect.policy import RestartPolicy, RestartState, decide

__all__ = [
    "ConnectClient",
    "ConnectError",
    "ConnectUnreachable",
    "ConnectorStatus",
    "RebalanceInProgress",
    "RestartOutcome",
    "RestartPolicy",
    "RestartState",
    "UnaddressableConnector",
    "UnknownConnector",
    "UnknownTask",
    "decide",
]
