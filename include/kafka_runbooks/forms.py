"""JSON schemas for the trigger forms' params, chosen for how Airflow 3.3's form renders them.

Airflow's form picks a widget from the schema: several non-null types give a JSON
editor (people then wonder whether to type ``4``, ``[4]`` or ``"4"``), a string type
without ``null`` makes an empty box "missing" and keeps Trigger disabled, a schema
without ``type`` gets its widget from the default value. So:

* broker lists and sizes have no top-level ``type`` and an ``anyOf``: a plain text box
  in the form, while REST callers and the sweeps may still send a list or bytes;
* selectors where empty means something allow ``null`` (the form sends null for an
  empty box).

Kept free of Airflow imports: the DAGs pass these dicts to ``Param(**schema)``.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.units import SIZE_PATTERN

BROKER_IDS_PATTERN = r"^\s*\d+(\s*,\s*\d+)*\s*$"


def broker_list_schema(keyword: str) -> dict[str, Any]:
    """Comma-separated broker ids or ``keyword`` (text box); a list of ids also passes (REST, sweeps)."""
    return {
        "anyOf": [
            {"type": "string", "pattern": rf"^\s*({keyword}|\d+(\s*,\s*\d+)*)\s*$"},
            {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
            {"type": "integer", "minimum": 0},
        ]
    }


def size_schema(allow_empty: bool = False) -> dict[str, Any]:
    """A size with a unit ("1 GiB", text box) or a number of bytes (REST, sweeps)."""
    options: list[dict[str, Any]] = [
        {"type": "string", "pattern": SIZE_PATTERN},
        {"type": "integer", "minimum": 1},
    ]
    if allow_empty:
        options.append({"type": "null"})
    return {"anyOf": options}


def id_list_schema() -> dict[str, Any]:
    """Optional comma-separated ids (text box, empty = none); a list of ids also passes (REST)."""
    return {
        "anyOf": [
            {"type": "string", "pattern": r"^\s*(\d+(\s*,\s*\d+)*)?\s*$"},
            {"type": "array", "items": {"type": "integer", "minimum": 0}},
            {"type": "null"},
        ]
    }


def parse_id_list(value: Any, what: str) -> list[int]:
    """ "0, 2" / [0, 2] / None -> [0, 2] / []; anything else is a ValueError naming ``what``."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if not p.isdigit()]
        if bad:
            raise BadInput(f"{what} must be ids separated by commas, e.g. '0,2', not {value!r}")
        return [int(p) for p in parts]
    if isinstance(value, list | tuple):
        return list(value)
    raise BadInput(f"{what} must be ids separated by commas, e.g. '0,2', not {value!r}")
