"""Sizes as people write them ("1 GiB", "50 MiB") and as Kafka wants them (bytes).

Trigger forms show byte sizes with units so nobody has to count the digits of
1073741824; the runbooks still accept plain integers (bytes), which is what the sweeps
and older REST callers send. Binary units (KiB, MiB, GiB, TiB) are powers of 1024, the
decimal ones (KB, MB, GB, TB) powers of 1000, as in ``kafka-configs`` documentation.
"""

from __future__ import annotations

import re
from typing import Any

from kafka_runbooks.errors import BadInput

UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}

# What a trigger form accepts: a number and an optional unit ("1 GiB", "512MiB", "1048576").
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([KkMmGgTt]i?[Bb]|[Bb])?\s*$"
# The same rule in words, for the form's refusal (no ')' in it: it becomes a regex comment).
SIZE_RULE = "a size such as 50 MiB or 1 GiB, units KiB MiB GiB TiB KB MB GB TB, or bytes"


class SizeError(BadInput):
    """Not a size: says what was given and what is expected."""


def parse_size(value: Any, what: str = "size") -> int:
    """Bytes from an integer (bytes) or a string with a unit; > 0, whole bytes."""
    if isinstance(value, bool) or value is None:
        raise SizeError(f"{what} must be a size such as '1 GiB' or a number of bytes, not {value!r}")
    if isinstance(value, int | float):
        number, factor = float(value), 1
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).lower() if match else None
        if not match or unit not in UNITS:
            raise SizeError(
                f"{what} must be a size such as '1 GiB', '50 MiB' or a number of bytes "
                f"(units: KiB, MiB, GiB, TiB, KB, MB, GB, TB), not {value!r}"
            )
        number, factor = float(match.group(1)), UNITS[unit]
    else:
        raise SizeError(f"{what} must be a size such as '1 GiB' or a number of bytes, not {value!r}")
    size = number * factor
    if size != int(size):
        raise SizeError(f"{what} must be whole bytes, not {value!r} ({size} bytes)")
    if size <= 0:
        raise SizeError(f"{what} must be more than 0 bytes, not {value!r}")
    return int(size)


def format_size(n: float) -> str:
    """Bytes for a person: '1.0 GiB', '3.4 MiB', '512 B' (binary units, as Kafka's quotas count them)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"


def exact_size(n: int) -> str:
    """Bytes in the largest binary unit that holds them whole: 1 << 30 -> '1 GiB', 50 << 20 ->
    '50 MiB'. A default kept in bytes is shown in a trigger form the way a person writes it, and
    :func:`parse_size` reads it back to the same bytes (``format_size`` rounds, for reading only)."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        factor = UNITS[unit.lower()]
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return str(n)


def format_duration(seconds: float) -> str:
    """95 -> '1 min 35 s': a rough figure for a person (estimates, time left), not a deadline."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


# Durations as people write them ("90s", "10m", "1h") and as the runbooks count them (seconds).
# A plain number counts in the unit its param's name says (operation_timeout_s: seconds,
# alert_after_minutes: minutes, recovery_duration_ms: milliseconds), so old confs keep their meaning.
DURATION_UNITS = {
    "ms": 0.001,
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "d": 86400,
}
PLAIN_UNITS = {"seconds": 1, "minutes": 60, "milliseconds": 0.001}
DURATION_PATTERN = r"\d+(\.\d+)?\s*(ms|s|sec|m|min|h|d)?"
# The sweep's thresholds may be turned off: -1 (as before) or "off".
OFF = -1.0


def duration_rule(plain: str = "seconds") -> str:
    """The duration rule in words for a form whose plain numbers count in ``plain`` (no ')' in it)."""
    return f"a duration such as 90s, 10m or 1h, units ms s m h d, or a number of {plain}"


def duration_pattern(allow_off: bool = False) -> str:
    """What a trigger form accepts as a duration ("10m", "90 s", "300"); with ``allow_off`` also off / -1."""
    off = "off|-1|" if allow_off else ""
    return rf"^\s*({off}{DURATION_PATTERN})\s*$"


class DurationError(BadInput):
    """Not a duration: says what was given and what is expected."""


def parse_duration(
    value: Any,
    what: str = "duration",
    plain: str = "seconds",
    minimum_s: float = 0.0,
    maximum_s: float | None = None,
    allow_off: bool = False,
) -> float:
    """Seconds from a number (in ``plain`` units) or a string with a unit, within the bounds given.

    With ``allow_off``, "off" or a negative number is :data:`OFF` (the sweep's "-1 turns it off").
    """
    rule = f"{what} must be {duration_rule(plain)}"
    if isinstance(value, bool) or value is None:
        raise DurationError(f"{rule}, not {value!r}")
    if allow_off and (
        (isinstance(value, str) and value.strip().lower() in ("off", "-1"))
        or (isinstance(value, int | float) and value < 0)
    ):
        return OFF
    if isinstance(value, int | float):
        seconds = float(value) * PLAIN_UNITS[plain]
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).lower() if match else None
        if not match or (unit and unit not in DURATION_UNITS):
            raise DurationError(f"{rule}, not {value!r}")
        factor = DURATION_UNITS[unit] if unit else PLAIN_UNITS[plain]
        seconds = float(match.group(1)) * factor
    else:
        raise DurationError(f"{rule}, not {value!r}")
    if seconds < minimum_s:
        raise DurationError(f"{what} must be at least {format_duration_exact(minimum_s)}, not {value!r}")
    if maximum_s is not None and seconds > maximum_s:
        raise DurationError(f"{what} must be at most {format_duration_exact(maximum_s)}, not {value!r}")
    return seconds


def format_duration_exact(seconds: float) -> str:
    """A bound for a refusal, exactly: '5 s', '0.001 s', '1 h' (whole hours/minutes when they are)."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def parse_id_list(value: Any, what: str) -> list[int]:
    """ "0, 2" / [0, 2] / None -> [0, 2] / []; anything else is a BadInput naming ``what``: a form's
    id list is a text box (a JSON editor reformats under the cursor), REST and sweeps pass a list."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if not p.isdigit()]
        if bad:
            raise BadInput(f"{what} must be ids separated by commas, e.g. '0,2', not {value!r}")
        return [int(p) for p in parts]
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    raise BadInput(f"{what} must be ids separated by commas, e.g. '0,2', not {value!r}")
