"""JSON schemas for the trigger forms' params, chosen for how Airflow 3.3's form renders them.

Airflow's form picks a widget from the schema: several non-null types give a JSON
editor (people then wonder whether to type ``4``, ``[4]`` or ``"4"``), a string type
without ``null`` makes an empty box "missing" and keeps Trigger disabled, a schema
without ``type`` gets its widget from the default value. So:

* broker lists and sizes have no top-level ``type`` and an ``anyOf``: a plain text box
  in the form, while REST callers and the sweeps may still send a list or bytes;
* selectors where empty means something allow ``null`` (the form sends null for an
  empty box);
* every ``pattern`` starts with its rule in words, as a regex comment ``(?#...)``: the
  API's 400 answer is jsonschema's message, "'x' does not match '<pattern>'", and the
  trigger form shows that answer above its fields; with the rule first the person reads
  "does not match '(?#broker ids separated by commas, e.g. 4 or 4,5, or detect)..."
  instead of a bare regex. (Python's ``re`` ignores the comment; Airflow's form does not
  check patterns in the browser.)
* a required choice with no safe default (which nodes to restart) defaults to ``null``:
  the form's Trigger stays enabled and the run's input check refuses it with a DECISION
  record naming what to fill in, before anything is done.

Kept free of Airflow imports: the DAGs pass these dicts to ``Param(**schema)``.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.unclean.request import PARTITION_ITEM, PARTITION_ITEM_RULE
from kafka_runbooks.units import PLAIN_UNITS, SIZE_PATTERN, SIZE_RULE, duration_pattern, duration_rule

BROKER_IDS_PATTERN = r"^\s*\d+(\s*,\s*\d+)*\s*$"


def explained(pattern: str, rule: str) -> str:
    """``pattern`` with ``rule`` in words in front of it, so a refusal quoting the pattern reads first as the rule."""
    if ")" in rule:
        raise BadInput(f"a regex comment ends at the first ')': {rule!r}")
    return f"(?#{rule}){pattern}"


def broker_list_schema(keyword: str) -> dict[str, Any]:
    """Comma-separated broker ids or ``keyword`` (text box); a list of ids also passes (REST, sweeps)."""
    rule = f"broker ids separated by commas, e.g. 4 or 4,5, or {keyword}"
    return {
        "anyOf": [
            {"type": "string", "pattern": explained(rf"^\s*({keyword}|\d+(\s*,\s*\d+)*)\s*$", rule)},
            {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
            {"type": "integer", "minimum": 0},
        ]
    }


def size_schema(allow_empty: bool = False) -> dict[str, Any]:
    """A size with a unit ("1 GiB", text box) or a number of bytes (REST, sweeps)."""
    options: list[dict[str, Any]] = [
        {"type": "string", "pattern": explained(SIZE_PATTERN, SIZE_RULE)},
        {"type": "integer", "minimum": 1},
    ]
    if allow_empty:
        options.append({"type": "null"})
    return {"anyOf": options}


def duration_schema(
    plain: str = "seconds",
    minimum: float = 0,
    maximum: float | None = None,
    allow_empty: bool = False,
    allow_off: bool = False,
) -> dict[str, Any]:
    """A duration with a unit ("10m", "90s", "1h"; text box) or a number of ``plain`` units (REST, sweeps).

    ``minimum``/``maximum`` bound the number in ``plain`` units; a string's bounds are checked
    by :func:`kafka_runbooks.units.parse_duration` when the run reads it (a pattern cannot).
    ``allow_off``: also "off" or -1 (the sweep's thresholds).
    """
    if plain not in PLAIN_UNITS:
        raise BadInput(f"plain must be one of {sorted(PLAIN_UNITS)}, not {plain!r}")
    rule = duration_rule(plain) + (", or off" if allow_off else "")
    number: dict[str, Any] = {"type": "number", "minimum": minimum}
    if maximum is not None:
        number["maximum"] = maximum
    options: list[dict[str, Any]] = [
        {"type": "string", "pattern": explained(duration_pattern(allow_off), rule)},
        number,
    ]
    if allow_off:
        options.append({"const": -1})
    if allow_empty:
        options.append({"type": "null"})
    return {"anyOf": options}


def partition_items_schema() -> dict[str, Any]:
    """``topic:partition`` items (the form's one-item-per-line box for an array of strings), or empty."""
    return {
        "type": ["null", "array"],
        "items": {"type": "string", "pattern": explained(PARTITION_ITEM, PARTITION_ITEM_RULE)},
    }


def node_list_schema() -> dict[str, Any]:
    """Node ids to restart or ``all`` (text box); empty by default, refused by the run's input check."""
    rule = "node ids separated by commas, e.g. 2 or 1,2,9001, or all"
    return {
        "type": ["null", "string"],
        "pattern": explained(r"^\s*(all|\d+(\s*,\s*\d+)*)?\s*$", rule),
    }


def id_list_schema() -> dict[str, Any]:
    """Optional comma-separated ids (text box, empty = none); a list of ids also passes (REST)."""
    return {
        "anyOf": [
            {
                "type": "string",
                "pattern": explained(
                    r"^\s*(\d+(\s*,\s*\d+)*)?\s*$", "ids separated by commas, e.g. 0 or 0,2"
                ),
            },
            {"type": "array", "items": {"type": "integer", "minimum": 0}},
            {"type": "null"},
        ]
    }
