"""The thresholds the evidence rules judge by, read from the cluster's own settings.

``broker.session.timeout.ms`` is how long the controller keeps a broker that stopped
heartbeating registered, unfenced and in its ISRs: a settle or verify period shorter than that
cannot see a death. ``controller.quorum.fetch.timeout.ms`` is how long a KRaft voter may go
without a fetch before Kafka itself gives up on it: a voter silent for longer is not caught up.

Both are read with DescribeConfigs of the brokers (their effective values: static, dynamic or
default). The session timeout is the controllers' to enforce; a broker answers with its own
setting, which Kafka validates the same way, so a deployment that sets it on the controllers
only is read at the brokers' value: the docs say to set it alike (the local stack does). The
largest value any broker gives is used: a longer session only makes a settle longer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_runbooks.errors import SafetyRefusal

SESSION_TIMEOUT = "broker.session.timeout.ms"
FETCH_TIMEOUT = "controller.quorum.fetch.timeout.ms"
KEYS = (SESSION_TIMEOUT, FETCH_TIMEOUT)


@dataclass(frozen=True)
class ClusterTimeouts:
    """The cluster's own failure-detection settings, with where each was read."""

    broker_session_timeout_ms: int
    quorum_fetch_timeout_ms: int
    source: str
    per_broker: dict[int, dict[str, int]] = field(default_factory=dict, compare=False)

    @property
    def broker_session_timeout_s(self) -> float:
        """``broker.session.timeout.ms`` in seconds."""
        return self.broker_session_timeout_ms / 1000

    def as_dict(self) -> dict:
        """JSON-ready, for decision records."""
        return {
            SESSION_TIMEOUT: self.broker_session_timeout_ms,
            FETCH_TIMEOUT: self.quorum_fetch_timeout_ms,
            "source": self.source,
        }


def timeouts_from(
    values: dict[int, dict[str, str | None]], errors: dict[int, str] | None = None
) -> ClusterTimeouts:
    """The timeouts from DescribeConfigs answers per broker (key -> effective value); a key no
    broker answered is unknown and refused: no rule guesses Kafka's default for a cluster."""
    per_broker: dict[int, dict[str, int]] = {}
    for broker, configs in sorted(values.items()):
        parsed = {k: int(v) for k, v in configs.items() if k in KEYS and _integer(v)}
        if parsed:
            per_broker[broker] = parsed
    missing = [k for k in KEYS if not any(k in c for c in per_broker.values())]
    if missing:
        why = "; ".join(f"broker {b}: {e}" for b, e in sorted((errors or {}).items()))
        raise SafetyRefusal(
            f"could not read {', '.join(missing)} from any broker (DescribeConfigs)"
            + (f": {why}" if why else "")
            + ": the time Kafka needs to notice a failure is unknown, so no settle can be judged"
        )
    session = max(c[SESSION_TIMEOUT] for c in per_broker.values() if SESSION_TIMEOUT in c)
    fetch = max(c[FETCH_TIMEOUT] for c in per_broker.values() if FETCH_TIMEOUT in c)
    return ClusterTimeouts(
        broker_session_timeout_ms=session,
        quorum_fetch_timeout_ms=fetch,
        source=f"DescribeConfigs of broker(s) {sorted(per_broker)} (the largest value)",
        per_broker=per_broker,
    )


def _integer(value: str | None) -> bool:
    try:
        return value is not None and int(value) >= 0
    except ValueError:
        return False


SAMPLE = 3  # brokers asked by default: a fleet's settings are alike, and a page must stay quick


def read_timeouts(admin, broker_ids: list[int] | None = None) -> ClusterTimeouts:
    """The cluster's timeouts, asked of ``broker_ids`` (default: the first ``SAMPLE`` registered,
    unfenced brokers; one that does not answer is named, the others' values count)."""
    if broker_ids is None:
        brokers = admin.describe_brokers()
        broker_ids = sorted(b for b, broker in brokers.items() if broker.available)[:SAMPLE]
    values, errors = admin.broker_configs(sorted(broker_ids), list(KEYS))
    return timeouts_from(values, errors)
