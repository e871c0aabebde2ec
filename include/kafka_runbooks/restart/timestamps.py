"""Start times as restart back ends report them (Docker's engine, Kubernetes' API).

Its own module because every back end reads them: the back ends' registry
(``backends``) builds the Docker back end (``docker``), so neither of the two can be the
other's source of a shared helper without an import circle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def parse_rfc3339_ms(value: Any) -> int | None:
    """``2026-01-01T00:00:00.123456789Z`` (Docker, Kubernetes) or a datetime -> epoch ms."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None  # Docker's zero time: never started
    try:
        head, dot, tail = value.partition(".")
        if dot:  # at most microseconds for fromisoformat; keep the zone suffix
            digits = "".join(c for c in tail if c.isdigit())
            tail = digits[:6] + tail[len(digits) :]
            value = f"{head}.{tail}"
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None
