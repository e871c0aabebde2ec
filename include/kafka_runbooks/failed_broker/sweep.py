"""The failed-broker sweep's settings, typed: read once at the start of the sweep task, then passed down.

Where each value comes from is the sweeps' one rule (``kafka_runbooks.settings``: the run's
params, the Variable ``kafka_failed_broker_sweep``, the environment
``KAFKA_RUNBOOKS_FAILED_BROKER_<KEY>``, these defaults); here the values become the thresholds
in seconds and the sizes in bytes, so a bad one fails the sweep before it reads the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.failed_broker.failures import Thresholds
from kafka_runbooks.failed_broker.request import (
    DEFAULT_MAX_BYTES_PER_CHUNK,
    DEFAULT_MAX_PARTITIONS_PER_CHUNK,
    DEFAULT_THROTTLE_BYTES_PER_SEC,
)
from kafka_runbooks.units import parse_duration, parse_size

SWEEP_VARIABLE = "kafka_failed_broker_sweep"
SWEEP_ENV_PREFIX = "KAFKA_RUNBOOKS_FAILED_BROKER_"
SWEEP_DEFAULTS: dict[str, Any] = {
    "alert_after_minutes": 15,
    "failure_threshold_minutes": 30,
    "max_failed_fraction": 1 / 3,
    "retrigger_after_minutes": None,
    "max_partitions_per_chunk": DEFAULT_MAX_PARTITIONS_PER_CHUNK,
    "max_bytes_per_chunk": DEFAULT_MAX_BYTES_PER_CHUNK,
    "throttle_bytes_per_sec": DEFAULT_THROTTLE_BYTES_PER_SEC,
    "require_approval": True,
    "elect_preferred_leaders": True,
    # a live broker's offline log dir past the failure threshold starts kafka_log_dir_failure only
    # when this is on; off (the default), the sweep tracks and alerts only
    "start_log_dir_failure": False,
}


def sweep_thresholds(settings: Mapping[str, Any]) -> Thresholds:
    """The sweep's thresholds in seconds: each '30m', '2h' or a number of minutes; 'off' or a negative
    number is -1 (turned off); retrigger_after_minutes null = the failure threshold."""

    def seconds(name: str) -> float:
        """One threshold in seconds (-1 when turned off)."""
        return parse_duration(settings[name], name, "minutes", allow_off=True)

    return Thresholds(
        alert_after_s=seconds("alert_after_minutes"),
        failure_threshold_s=seconds("failure_threshold_minutes"),
        max_failed_fraction=float(settings["max_failed_fraction"]),
        retrigger_after_s=None
        if settings["retrigger_after_minutes"] is None
        else seconds("retrigger_after_minutes"),
    )


def sweep_sizes(settings: Mapping[str, Any]) -> dict[str, int]:
    """The sizes passed on to the reassignment, in bytes: '1 GiB' / '50 MiB' from the form or the
    Variable, or bytes (the run takes either; bytes keep its conf plain)."""
    return {
        name: parse_size(settings[name], name) for name in ("max_bytes_per_chunk", "throttle_bytes_per_sec")
    }


@dataclass(frozen=True)
class SweepSettings:
    """One sweep's settings as it acts on them. ``given`` keeps them as read (the sweep's result
    shows what the deployment or the run said, '2h' and all); ``passed_on`` is what a started
    heal or log-dir run gets in its conf."""

    given: Mapping[str, Any]
    thresholds: Thresholds
    max_partitions_per_chunk: int
    max_bytes_per_chunk: int
    throttle_bytes_per_sec: int
    require_approval: bool
    elect_preferred_leaders: bool
    start_log_dir_failure: bool

    @classmethod
    def from_given(cls, given: Mapping[str, Any]) -> SweepSettings:
        """Parse the layered settings (thresholds first, then sizes: a bad one is named, nothing read)."""
        thresholds = sweep_thresholds(given)
        sizes = sweep_sizes(given)
        return cls(
            given=dict(given),
            thresholds=thresholds,
            max_partitions_per_chunk=int(given["max_partitions_per_chunk"]),
            **sizes,
            require_approval=bool(given["require_approval"]),
            elect_preferred_leaders=bool(given["elect_preferred_leaders"]),
            start_log_dir_failure=bool(given["start_log_dir_failure"]),
        )

    def passed_on(self) -> dict[str, Any]:
        """The chunk, throttle, gate and election settings a started run's conf carries."""
        return {
            "max_partitions_per_chunk": self.max_partitions_per_chunk,
            "max_bytes_per_chunk": self.max_bytes_per_chunk,
            "throttle_bytes_per_sec": self.throttle_bytes_per_sec,
            "require_approval": self.require_approval,
            "elect_preferred_leaders": self.elect_preferred_leaders,
        }
