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
errors (kafka-python, confluent-kafka) are translated once, at the admin facade, class
to class (``kafka_runbooks.admin_errors.client_errors``, applied by :func:`map_exceptions`);
nothing outside ``kafka_runbooks.admin`` catches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
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
    exception is an instance of, the most specific target wins (httpx's
    ``map_exceptions``): a kafka-python ``KafkaTimeoutError`` is a ``KafkaError`` too, and
    "nothing answered" (``ClusterUnreachable``) is the more specific ``AdminError``.
    """
    try:
        yield
    except KafkaRunbookError:
        raise
    except Exception as exc:
        cls = mapped_class(mapping, exc)
        if cls is None:
            raise
        raise cls(f"{what} on {where} failed: {type(exc).__name__}: {exc}") from exc


def mapped_class(mapping: ErrorMap, exc: BaseException) -> type[KafkaRunbookError] | None:
    """Our class for ``exc`` by ``mapping`` (the most specific of those that apply), or None."""
    chosen: type[KafkaRunbookError] | None = None
    for client_class, target in mapping.items():
        if not isinstance(exc, client_class):
            continue
        cls = target if isinstance(target, type) else target(exc)
        if chosen is None or issubclass(cls, chosen):
            chosen = cls
    return chosen
