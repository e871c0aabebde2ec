"""The sweeps' one precedence rule: the run's param, the Airflow Variable, the environment, the default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kafka_runbooks.errors import BadInput
from kafka_runbooks.settings import UNSET, first_set, layered_settings

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = {"threshold": 30, "retrigger": None, "start": False}


def test_the_first_layer_that_names_a_setting_wins_and_says_which():
    assert first_set(1, 2, 3, 4) == (1, "param")
    assert first_set(UNSET, 2, 3, 4) == (2, "Variable")
    assert first_set(UNSET, None, 3, 4) == (None, "Variable")  # null set on purpose is a value
    assert first_set(UNSET, UNSET, 3, 4) == (3, "environment")
    assert first_set(UNSET, UNSET, UNSET, 4) == (4, "default")


def _read(params, variable=None, **env):
    environ = {f"KR_TEST_{k.upper()}": v for k, v in env.items()}
    return layered_settings(
        DEFAULTS, params, variable, variable_name="kr_test", env_prefix="KR_TEST_", environ=environ
    )


def test_layered_settings_key_by_key():
    assert _read({}) == DEFAULTS
    assert _read({}, threshold="-1", start="true") == {**DEFAULTS, "threshold": -1, "start": True}
    variable = json.dumps({"threshold": 60, "retrigger": None})
    # the Variable beats the environment key by key, a null in it included; a null param is not set
    got = _read({"threshold": None, "retrigger": None}, variable, threshold="5", retrigger="10", start="true")
    assert got == {"threshold": 60, "retrigger": None, "start": True}
    assert _read({"threshold": "2h"}, variable, threshold="5")["threshold"] == "2h"


def test_a_bad_layer_is_named_never_the_default():
    with pytest.raises(BadInput, match=r"Variable kr_test has unknown keys \['treshold'\]"):
        _read({}, json.dumps({"treshold": 5}))
    with pytest.raises(BadInput, match="Variable kr_test must be a JSON object"):
        _read({}, "[1]")
    with pytest.raises(ValueError):  # the environment's values are JSON too
        _read({}, threshold="30 minutes")


def test_every_sweep_reads_its_settings_through_the_one_rule():
    """A sweep that reads ``<PREFIX><KEY>`` from the environment itself is a second copy of the rule
    (the failed-broker sweep and the health sweep each had one): only kafka_runbooks.settings may."""
    own = ROOT / "include" / "kafka_runbooks" / "settings.py"
    copies = [
        str(path.relative_to(ROOT))
        for folder in ("dags", "plugins", "include")
        for path in (ROOT / folder).rglob("*.py")
        if path != own and re.search(r"environ(?:\.get)?\(\s*f[\"']KAFKA_RUNBOOKS_", path.read_text())
    ]
    assert not copies, f"settings read key by key from the environment outside the rule: {copies}"
