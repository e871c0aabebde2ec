"""How long has a broker been silent? Its own answers, polled, aged on one clock.

A broker that does not answer itself now (:mod:`.serving`) may answer on the next poll. How long
it has been silent is the age of the first poll that found it so, in an unbroken run of polls that
all did, measured on the clock that stamped both: a spell recorded by another clock (a poke that
ran on another worker) tells no age, so the spell starts again on this clock (unknown is never
"long enough"). A broker that answers ends its spell.

Kafka itself gives up on a broker that stopped heartbeating after ``broker.session.timeout.ms``
(the controller fences it); a spell is **past its limit** once it is longer than that, read from
the cluster (:mod:`.settings`), plus a bound the caller names (the time a supervisor takes to
bring a crashed broker back). Without the cluster's setting the limit is unknown, and an unknown
limit is never passed.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_runbooks.evidence.clock import Stamp, age_ms
from kafka_runbooks.evidence.settings import ClusterTimeouts


def host_clock(host: str | None = None) -> str:
    """The name of this host's clock (a task's ``time.time()``), kept with a stamp that outlives the
    process: a later poke on another worker reads it as another clock, never as its own."""
    return f"worker {host or socket.gethostname()}"


@dataclass(frozen=True)
class Silence:
    """One broker's spell of silence: since when (on the clock that saw it first) and why."""

    broker_id: int
    since: Stamp
    why: str

    def age_ms(self, now: Stamp) -> int | None:
        """How long the spell has lasted at ``now``; None when ``now`` is on another clock."""
        age = age_ms(self.since, now)
        return None if age is None or age < 0 else age

    def as_dict(self) -> dict:
        """JSON-ready, for a state file and decision records."""
        return {"since_ms": self.since.ms, "clock": self.since.clock, "why": self.why}

    @staticmethod
    def from_dict(broker_id: int, raw: Mapping) -> Silence:
        """Read a spell as :meth:`as_dict` wrote it."""
        return Silence(int(broker_id), Stamp(raw.get("since_ms"), str(raw.get("clock"))), str(raw.get("why")))


def track(previous: Mapping[int, Silence], silent: Mapping[int, str], now: Stamp) -> dict[int, Silence]:
    """The spells after one poll (``silent``: broker -> why it did not answer now). A broker still
    silent keeps its start when that start is on ``now``'s clock and not after it; one newly silent,
    or whose spell another clock recorded, starts now; one that answered is dropped."""
    out: dict[int, Silence] = {}
    for broker, why in sorted(silent.items()):
        before = previous.get(broker)
        known = before is not None and before.age_ms(now) is not None
        out[broker] = Silence(broker, before.since if known else now, why)
    return out


def limit_ms(timeouts: ClusterTimeouts, bound_s: float) -> int:
    """The longest spell to wait out: the cluster's ``broker.session.timeout.ms`` plus ``bound_s``."""
    return timeouts.broker_session_timeout_ms + int(bound_s * 1000)


def past_limit(spell: Silence, now: Stamp, timeouts: ClusterTimeouts | None, bound_s: float) -> bool:
    """Whether the spell has lasted longer than :func:`limit_ms`; False while its age or the cluster's
    session timeout is unknown (an unknown limit is never passed)."""
    age = spell.age_ms(now)
    return timeouts is not None and age is not None and age > limit_ms(timeouts, bound_s)
