"""One error tree for the runbooks: what went wrong, in four kinds a caller can act on.

Every exception the library raises derives from :class:`KafkaRunbookError`, through
one of its branches:

- :class:`BadInput`: the request, a connection's extras or a setting is wrong; nothing
  was done on the cluster. Also a ``ValueError``, as before.
- :class:`CallFailed`: a call to Kafka, Kafka Connect or a restart back end's API
  answered with an error. :class:`Unreachable` below it: nothing answered at all
  (callers read that as "state unknown", never as "healthy" or "down").
- :class:`SafetyRefusal`: the runbook refuses to act because acting could not be proved
  safe (no approval of exactly this, another runbook holds the cluster, no safe plan).
  :class:`NotAuthorized` below it: the connection's principal lacks an ACL the runbook needs,
  named with the request and the resource (found up front by ``kafka_runbooks.acls``, or
  refused by a broker).
- :class:`RunbookFailed`: the runbook acted, or tried to, and the evidence read back
  says it did not work.

``CallFailed``, ``SafetyRefusal`` and ``RunbookFailed`` are also ``RuntimeError`` s, so
code written against the older classes keeps catching them. Client libraries' own
errors (kafka-python, confluent-kafka) are translated once, at the admin facade, class
to class (``kafka_runbooks.admin_errors.client_errors``, applied by :func:`map_exceptions`);
nothing outside ``kafka_runbooks.admin`` catches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from kafka_runbooks.acl_table import CLUSTER, TOPIC, operation_for


class KafkaRunbookError(Exception):
    """Root of every error the runbooks raise."""

    @classmethod
    def translated(cls, what: str, where: str, exc: BaseException) -> KafkaRunbookError:
        """This class for a client library's ``exc`` raised by ``what`` on ``where`` (the one
        message :func:`map_exceptions` gives; a subclass that says more overrides it)."""
        return cls(f"{what} on {where} failed: {type(exc).__name__}: {exc}")


class BadInput(KafkaRunbookError, ValueError):
    """The input is wrong (params, connection extras, settings); nothing was done."""


class CallFailed(KafkaRunbookError, RuntimeError):
    """A call to Kafka, Kafka Connect or a restart back end failed; the message names it."""


class Unreachable(CallFailed):
    """Nothing answered: the state behind it is unknown."""


class SafetyRefusal(KafkaRunbookError, RuntimeError):
    """The runbook will not act: doing so could not be proved safe."""


class NotAuthorized(SafetyRefusal):
    """The connection's principal lacks ``operation`` on ``resource``: a request was (or would be)
    refused by the cluster's authorizer.

    A :class:`SafetyRefusal`, not :class:`BadInput`: no param is wrong and a retry cannot help
    (someone must grant the ACL), and when a broker refuses mid-run "nothing was done", which
    ``BadInput`` promises, may not hold; the runbook stops instead of acting on what it cannot
    finish (a reassignment without its throttle, a reorder without its election). Raised up front
    by ``kafka_runbooks.acls`` (before the gate), or by the admin facade when a broker refuses.
    """

    def __init__(
        self, operation: str | None, resource: str, request: str = "", target: str = "", message: str = ""
    ) -> None:
        self.operation, self.resource, self.request, self.target = operation, resource, request, target
        lacks = f"lacks {operation} on {resource}" if operation else f"is not authorized on {resource}"
        head = f"{request} on {target} refused" if request else "refused"
        super().__init__(message or f"{head}: the principal {lacks}")

    @classmethod
    def translated(cls, what: str, where: str, exc: BaseException) -> NotAuthorized:
        """From a client library's authorization error (kafka-python's ``...AuthorizationFailedError``
        classes, confluent-kafka's ``..._AUTHORIZATION_FAILED`` codes): the operation the request
        needs on that kind of resource (``kafka_runbooks.acl_table``), naming the request."""
        kind = authorization_kind(exc)
        resource = {CLUSTER: "the cluster", TOPIC: "the topic"}.get(kind, f"the {kind.lower()}")
        detail = str(exc).strip()
        return cls(operation_for(what, kind), resource + (f" ({detail})" if detail else ""), what, where)


def authorization_kind(exc: BaseException) -> str:
    """CLUSTER, TOPIC, GROUP, TRANSACTIONAL_ID or DELEGATION_TOKEN: which kind of resource a
    client library's authorization error is about, read from its class or code name."""
    error = exc.args[0] if exc.args else None
    name = error.name() if hasattr(error, "name") and callable(error.name) else type(exc).__name__
    flat = name.upper().replace("_", "")
    for kind in ("CLUSTER", "TOPIC", "GROUP", "TRANSACTIONALID", "DELEGATIONTOKEN"):
        if flat.startswith(kind):
            return {"TRANSACTIONALID": "TRANSACTIONAL_ID", "DELEGATIONTOKEN": "DELEGATION_TOKEN"}.get(
                kind, kind
            )
    return CLUSTER


class RunbookFailed(KafkaRunbookError, RuntimeError):
    """The runbook acted (or tried to) and what was read back says it did not work."""


class AdminError(CallFailed):
    """An admin call failed; the message names what failed and why."""


class ClusterUnreachable(AdminError, Unreachable):
    """No broker of the bootstrap list answered."""


#: what a foreign exception becomes: our class, or a function of the exception that names it
#: (when the client says more in the error than in its class: confluent-kafka's codes)
ErrorMap = Mapping[
    type[BaseException], type[KafkaRunbookError] | Callable[[BaseException], type[KafkaRunbookError]]
]


@contextmanager
def map_exceptions(mapping: ErrorMap, what: str, where: str) -> Iterator[None]:
    """Translate an exception raised inside the block by its class, through ``mapping``.

    ``what`` names the call (``DescribeCluster``), ``where`` the cluster (its bootstrap
    servers). Errors already in the tree pass through untouched, and so does anything the
    map does not name (a bug is not hidden as a cluster error). Of the map's classes the
    exception is an instance of, the nearest to its own class wins (:func:`mapped_class`): a
    kafka-python ``KafkaTimeoutError`` is a ``KafkaError`` too, and is ``ClusterUnreachable`` by
    its own entry. The message is the target class's (:meth:`KafkaRunbookError.translated`).
    """
    try:
        yield
    except KafkaRunbookError:
        raise
    except Exception as exc:
        cls = mapped_class(mapping, exc)
        if cls is None:
            raise
        raise cls.translated(what, where, exc) from exc


def mapped_class(mapping: ErrorMap, exc: BaseException) -> type[KafkaRunbookError] | None:
    """Our class for ``exc`` by ``mapping``, or None: the entry of the client class nearest to the
    exception's own (its MRO), as an ``except`` clause would pick; so a kafka-python
    ``TopicAuthorizationFailedError`` is ``NotAuthorized`` by its own entry, not ``AdminError`` by
    ``KafkaError``'s, whatever the map's order."""
    mro = type(exc).__mro__
    matching = [(mro.index(c), target) for c, target in mapping.items() if c in mro]
    if not matching:
        return None
    target = min(matching, key=lambda pair: pair[0])[1]
    return target if isinstance(target, type) else target(exc)
