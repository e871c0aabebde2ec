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
- :class:`RunbookFailed`: the runbook acted, or tried to, and the evidence read back
  says it did not work.

``CallFailed``, ``SafetyRefusal`` and ``RunbookFailed`` are also ``RuntimeError`` s, so
code written against the older classes keeps catching them. Client libraries' own
errors (kafka-python, confluent-kafka) are translated once, at the admin facade, by
:func:`map_client_errors`; nothing outside ``kafka_runbooks.admin`` catches them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class KafkaRunbookError(Exception):
    """Root of every error the runbooks raise."""


class BadInput(KafkaRunbookError, ValueError):
    """The input is wrong (params, connection extras, settings); nothing was done."""


class CallFailed(KafkaRunbookError, RuntimeError):
    """A call to Kafka, Kafka Connect or a restart back end failed; the message names it."""


class Unreachable(CallFailed):
    """Nothing answered: the state behind it is unknown."""


class SafetyRefusal(KafkaRunbookError, RuntimeError):
    """The runbook will not act: doing so could not be proved safe."""


class RunbookFailed(KafkaRunbookError, RuntimeError):
    """The runbook acted (or tried to) and what was read back says it did not work."""


class AdminError(CallFailed):
    """An admin call failed; the message names what failed and why."""


class ClusterUnreachable(AdminError, Unreachable):
    """No broker of the bootstrap list answered."""


#: kafka-python errors (and their subclasses) that mean "nobody answered", by class name
_UNREACHABLE_KAFKA_PYTHON = frozenset(
    {"KafkaConnectionError", "KafkaTimeoutError", "RequestTimedOutError", "NodeNotReadyError"}
)


@contextmanager
def map_client_errors(what: str, where: str) -> Iterator[None]:
    """Translate a client library's error raised inside the block into the tree.

    ``what`` names the call (``DescribeCluster``), ``where`` the cluster (its bootstrap
    servers). Errors already in the tree pass through untouched; kafka-python errors
    that mean nothing answered and confluent-kafka's transport/timeout errors become
    ``ClusterUnreachable``, every other kafka-python or confluent-kafka error
    ``AdminError``. Anything else (a bug) is not hidden.
    """
    try:
        yield
    except KafkaRunbookError:
        raise
    except Exception as exc:
        kind = _client_error_kind(exc)
        if kind is None:
            raise
        cls = ClusterUnreachable if kind == "unreachable" else AdminError
        raise cls(f"{what} on {where} failed: {type(exc).__name__}: {exc}") from exc


def _client_error_kind(exc: BaseException) -> str | None:
    """ "unreachable", "failed" or None (not a Kafka client's error)."""
    module = type(exc).__module__ or ""
    if module.startswith("kafka.") or module == "kafka":
        names = {cls.__name__ for cls in type(exc).__mro__}
        return "unreachable" if names & _UNREACHABLE_KAFKA_PYTHON else "failed"
    if module.startswith("confluent_kafka") or module == "cimpl":
        from confluent_kafka import KafkaError

        error = exc.args[0] if exc.args else None
        code = error.code() if isinstance(error, KafkaError) else None
        unreachable = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}
        return "unreachable" if code in unreachable else "failed"
    return None
