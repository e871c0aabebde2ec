"""The lowest replication throttle Kafka holds, read from the receivers' own settings.

Kafka checks a follower's replication quota before each fetch, not during it: while the rate
measured over the quota window (``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``) is under the throttle, the next fetch takes up to
``replica.fetch.max.bytes`` per throttled partition, and only then is the window over quota. So a
receiver copies at least about one such fetch per window: below ``replica.fetch.max.bytes`` /
window the throttle does not hold (issue #39 point 6: at 1 KiB/s the gate said "about 14 min 52 s",
the copy ran at 60.5 KiB/s and ended in ~100 s). The gate says so, with that rate, and the time at
the throttle becomes what it is there: the longest the copy should take, not an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_runbooks.units import format_size

FLOOR_KEYS = (
    "replica.fetch.max.bytes",
    "replication.quota.window.num",
    "replication.quota.window.size.seconds",
)


@dataclass(frozen=True)
class ThrottleFloor:
    """The settings a receiver enforces its throttle with (the smallest among the receivers)."""

    fetch_max_bytes: int
    window_s: float
    brokers: tuple[int, ...]  # the receivers it was read from

    @property
    def bytes_per_sec(self) -> float:
        """About one fetch per quota window: below this a throttle is not held."""
        return self.fetch_max_bytes / self.window_s

    def warning(self, throttle_bytes_per_sec: int) -> str | None:
        """Words for the gate when ``throttle_bytes_per_sec`` is below what Kafka holds; None above."""
        if throttle_bytes_per_sec >= self.bytes_per_sec:
            return None
        return (
            f"below what Kafka holds: a receiver fetches up to {format_size(self.fetch_max_bytes)} "
            f"(replica.fetch.max.bytes) per throttled partition once per quota window ({self.window_s:g} s), "
            f"so expect up to about {format_size(int(self.bytes_per_sec))}/s per partition in flight, "
            "not the throttle; the time at the throttle is the longest the copy should take"
        )

    def as_dict(self) -> dict:
        """As the validate task hands it to the gate (XCom)."""
        return {
            "fetch_max_bytes": self.fetch_max_bytes,
            "window_s": self.window_s,
            "brokers": list(self.brokers),
        }


def floor_from(values: dict[int, dict[str, str | None]]) -> ThrottleFloor | None:
    """The floor from each receiver's effective settings (``ClusterAdmin.broker_configs``): the
    smallest fetch over the longest window (the lowest rate any receiver lets through). None when no
    receiver answered all three (unknown: the gate then says nothing it cannot back)."""
    read = {}
    for broker, v in values.items():
        try:
            fetch = int(v[FLOOR_KEYS[0]])
            window = int(v[FLOOR_KEYS[1]]) * float(v[FLOOR_KEYS[2]])
        except (KeyError, TypeError, ValueError):
            continue
        if fetch > 0 and window > 0:
            read[broker] = (fetch, window)
    if not read:
        return None
    return ThrottleFloor(
        fetch_max_bytes=min(f for f, _ in read.values()),
        window_s=max(w for _, w in read.values()),
        brokers=tuple(sorted(read)),
    )


def from_dict(raw: dict | None) -> ThrottleFloor | None:
    """The XCom form back (None stays None: not read)."""
    if not raw:
        return None
    return ThrottleFloor(int(raw["fetch_max_bytes"]), float(raw["window_s"]), tuple(raw.get("brokers") or ()))
