"""Bad input from a trigger form ends as a DECISION record saying what was wrong, then a clean failure.

Without this, a value the schema let through but the runbook rejects (an unknown mode,
"4;5" as a broker list, an unparsable JSON partition list) shows up as a Python
traceback; the person who filled in the form needs one line: which param, what was
wrong, and that nothing was done.

The form fields' schemas (``kafka_runbooks.forms``) are re-exported here, so the DAGs
import only the plugin layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kafka_runbooks import decisions
from kafka_runbooks.forms import broker_list_schema, id_list_schema, size_schema

__all__ = ["broker_list_schema", "id_list_schema", "refuse_bad_input", "size_schema"]

T = TypeVar("T")


def refuse_bad_input(parse: Callable[[Any], T], params: Mapping[str, Any], logger: str) -> T:
    """``parse(params)``; a ValueError becomes a DECISION record and an AirflowFailException (no retry)."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        return parse(dict(params))
    except ValueError as exc:
        decisions.record(
            "validate",
            "refuse the run: nothing was done",
            f"a parameter is not valid: {exc}",
            logger=logging.getLogger(logger),
            level=logging.ERROR,
        )
        raise AirflowFailException(f"bad input, nothing was done: {exc}") from None
