"""The admin facade's one translation of client-library errors into the library's tree.

kafka-python's and confluent-kafka's exceptions are mapped class to class, once
(:func:`client_errors`), and applied as a public admin method returns (:func:`rpc`); nothing
else in the library catches a client library's error. Kept apart from the facade so the
facade's request groups (``admin.py``, ``admin_configs.py``) share it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any, TypeVar

from kafka_runbooks.errors import (
    AdminError,
    ClusterUnreachable,
    ErrorMap,
    KafkaRunbookError,
    NotAuthorized,
    map_exceptions,
)

F = TypeVar("F", bound=Callable[..., Any])
# the client libraries' authorization errors: kafka-python's classes, confluent-kafka's codes
KAFKA_PYTHON_AUTHORIZATION = (
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "TransactionalIdAuthorizationFailedError",
    "DelegationTokenAuthorizationFailedError",
)
CONFLUENT_AUTHORIZATION = (
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
)


@cache
def client_errors() -> ErrorMap:
    """The one map from the client libraries' exception classes to the error tree.

    kafka-python: the errors that mean nothing answered (a refused or lost connection, a
    node not ready, a request or the client timing out) are ``ClusterUnreachable``; every
    other ``KafkaError`` is an answer with an error, ``AdminError``. confluent-kafka puts
    the difference in the error's code, not its class: transport, timeout and
    all-brokers-down codes are ``ClusterUnreachable``, the others ``AdminError``. An
    authorization error of either (kafka-python's ``TopicAuthorizationFailedError``,
    ``ClusterAuthorizationFailedError``, ...; confluent-kafka's ``TOPIC_AUTHORIZATION_FAILED``,
    ``CLUSTER_AUTHORIZATION_FAILED``, ...) is ``NotAuthorized``, naming the request and the
    operation it needs. Built on first use: importing the facade loads no client library.
    """
    from kafka import errors as kp

    mapping: dict = {
        kp.KafkaError: AdminError,
        kp.KafkaConnectionError: ClusterUnreachable,
        kp.KafkaTimeoutError: ClusterUnreachable,
        kp.RequestTimedOutError: ClusterUnreachable,
        kp.NodeNotReadyError: ClusterUnreachable,
        # the authorizer said no: the principal lacks an ACL (named by NotAuthorized.translated)
        **{getattr(kp, name): NotAuthorized for name in KAFKA_PYTHON_AUTHORIZATION if hasattr(kp, name)},
    }
    try:
        from confluent_kafka import KafkaException
    except ImportError:  # confluent-kafka is optional: kafka-python sends every RPC
        return mapping
    mapping[KafkaException] = _confluent_error_class
    return mapping


def _confluent_error_class(exc: BaseException) -> type[KafkaRunbookError]:
    """confluent-kafka's ``KafkaException`` by the code of the ``KafkaError`` it carries."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, KafkaError) else None
    unreachable = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}
    refused = {getattr(KafkaError, name) for name in CONFLUENT_AUTHORIZATION if hasattr(KafkaError, name)}
    if code in refused:
        return NotAuthorized
    return ClusterUnreachable if code in unreachable else AdminError


def map_client_errors(what: str, where: str):
    """The facade's translation (a context manager): a client library's error raised inside
    becomes ``ClusterUnreachable`` or ``AdminError`` by :func:`client_errors`."""
    return map_exceptions(client_errors(), what, where)


def rpc(what: str) -> Callable[[F], F]:
    """The facade's boundary: a client library's error leaving the method is translated
    once, here, into the error tree (:func:`map_client_errors`)."""

    def decorate(method: F) -> F:
        """Wrap ``method`` so any client error it raises is mapped (one place) to the runbooks' errors,
        naming the RPC."""

        @wraps(method)
        def call(self, *args: Any, **kwargs: Any) -> Any:
            """The wrapped call, inside :func:`map_client_errors`."""
            with map_client_errors(what, self.bootstrap_servers):
                return method(self, *args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate
