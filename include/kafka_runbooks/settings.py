"""Where a scheduled sweep's settings come from: one precedence rule for every sweep.

A deployment sets a sweep once (an Airflow Variable, or the environment when it has no
Variable store it trusts), and a person running it by hand overrides one value for one run
(the run's params). So, first found wins:

1. the run's param (null is not set: the form shows null for "use the deployment's");
2. the Airflow Variable;
3. the environment;
4. the default.

The failed-broker sweep, the health sweep (each a JSON object of keys, see
:func:`layered_settings`) and the fleet's cluster list (one value,
``kafka_runbooks.fleet.resolve_clusters``) read theirs with :func:`first_set`. Airflow-free:
the glue reads the Variable and hands its text here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Final

from kafka_runbooks.errors import BadInput


class _Unset:
    """A layer that does not name the setting (None may be a value a layer sets on purpose)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()
PARAM, VARIABLE, ENVIRONMENT, DEFAULT = "param", "Variable", "environment", "default"


def first_set(param: Any, variable: Any, environment: Any, default: Any) -> tuple[Any, str]:
    """The value of the first layer that names it (``UNSET``: it does not), and which layer that
    was, so a decision record can say who chose the value."""
    for source, value in ((PARAM, param), (VARIABLE, variable), (ENVIRONMENT, environment)):
        if value is not UNSET:
            return value, source
    return default, DEFAULT


def layered_settings(
    defaults: Mapping[str, Any],
    params: Mapping[str, Any],
    variable: str | None,
    *,
    variable_name: str,
    env_prefix: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every key of ``defaults`` by :func:`first_set`: the run's param when not null, the Variable's
    JSON object when it has the key (a null there is a value), the environment
    ``<env_prefix><KEY>`` as JSON, the default. A Variable that is not a JSON object or names an
    unknown key is BadInput: a typo must not fall back to the default silently."""
    from_variable = _variable_object(variable, variable_name, defaults)
    environ = os.environ if environ is None else environ
    out = {}
    for name, default in defaults.items():
        env = environ.get(f"{env_prefix}{name.upper()}")
        out[name], _ = first_set(
            UNSET if params.get(name) is None else params[name],
            from_variable.get(name, UNSET),
            UNSET if env is None else json.loads(env),
            default,
        )
    return out


def _variable_object(text: str | None, name: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The Variable's JSON object (empty when unset), its keys checked against the known ones."""
    value = json.loads(text) if text else {}
    if not isinstance(value, dict):
        raise BadInput(f"Variable {name} must be a JSON object, not {text!r}")
    unknown = set(value) - set(defaults)
    if unknown:
        raise BadInput(f"Variable {name} has unknown keys {sorted(unknown)}; known: {sorted(defaults)}")
    return value
