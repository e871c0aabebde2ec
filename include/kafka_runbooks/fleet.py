"""Which Kafka clusters the sweeps cover: one setting for the whole deployment.

A platform team runs many clusters from one Airflow. The sweeps (health, failed brokers,
metadata errors) run one mapped task per cluster named here, so one cluster's failure
fails only its own task instance and never hides another's result.

The list is read when a sweep runs, never when a DAG file is parsed (no network or
metadata DB at parse time), first found wins:

1. the run's ``kafka_config_ids`` param (a list; null = not set);
2. the Airflow Variable ``kafka_runbooks_clusters``;
3. the environment variable ``KAFKA_RUNBOOKS_CLUSTERS``;
4. ``kafka_default``, the one local cluster.

Variable and environment take a comma list of Airflow connection ids
(``kafka_eu1,kafka_us1``) or a JSON list. Each cluster's companion connections follow its
id: ``kafka_default`` keeps ``kafka_broker_probe_default`` (metrics), every other cluster
``X`` uses ``X_probe``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.settings import DEFAULT, ENVIRONMENT, PARAM, UNSET, VARIABLE, first_set

CLUSTERS_VARIABLE = "kafka_runbooks_clusters"
CLUSTERS_ENV = "KAFKA_RUNBOOKS_CLUSTERS"
DEFAULT_CLUSTER = "kafka_default"
DEFAULT_PROBE = "kafka_broker_probe_default"
# Airflow connection ids: letters, digits, '_', '-', '.'
_CONN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")


class FleetSettingError(BadInput):
    """The cluster list is unusable; the message names where it came from."""


# Params and stored records said ``kafka_conn_id`` before the name became the Airflow Kafka
# provider's ``kafka_config_id``. A run conf still using an old name is refused (silently
# ignored, it would send the run to ``kafka_default``); records written before the rename
# (run folders, reports, stop requests, run confs in Airflow's database) are still read.
RENAMED_PARAMS = {"kafka_conn_id": "kafka_config_id", "kafka_conn_ids": "kafka_config_ids"}


def refuse_renamed_params(params: Any) -> None:
    """Raise BadInput naming every old param name in ``params`` and its new name (any mapping:
    Airflow's ``ParamsDict`` is no ``dict``, and an old name in it must be refused all the same)."""
    old = [name for name in RENAMED_PARAMS if isinstance(params, Mapping) and name in params]
    if old:
        renamed = ", ".join(f"{name} is now {RENAMED_PARAMS[name]}" for name in old)
        raise BadInput(f"renamed params: {renamed}; nothing was done")


def config_id_of(record: Any, default: str | None = None) -> str | None:
    """The Kafka connection id a stored record or run conf names, under the new or the old key."""
    if not isinstance(record, dict):
        return default
    return record.get("kafka_config_id") or record.get("kafka_conn_id") or default


def parse_clusters(raw: Any, source: str) -> list[str]:
    """A comma list or JSON list of connection ids, in order, each once; refuse anything else."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except ValueError as exc:
                raise FleetSettingError(f"{source} is not a valid JSON list: {exc}") from exc
        else:
            raw = text.split(",")
    if not isinstance(raw, Iterable) or isinstance(raw, dict):
        raise FleetSettingError(
            f"{source} must be a comma list or a JSON list of connection ids, not {raw!r}"
        )
    ids: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            raise FleetSettingError(f"{source}: {item!r} is not a connection id")
        item = item.strip()
        if not item:
            continue
        if not _CONN_ID.match(item):
            raise FleetSettingError(
                f"{source}: {item!r} is not an Airflow connection id (letters, digits, '_', '-', '.')"
            )
        if item not in ids:
            ids.append(item)
    if not ids:
        raise FleetSettingError(f"{source} names no cluster")
    return ids


def resolve_clusters(param: Any, variable: str | None, env: str | None) -> tuple[list[str], str]:
    """The clusters to sweep and which setting named them (the sweeps' one rule,
    ``kafka_runbooks.settings.first_set``; an empty value is not set)."""
    raw, layer = first_set(*(UNSET if v in (None, "", []) else v for v in (param, variable, env)), None)
    if layer == DEFAULT:
        return [DEFAULT_CLUSTER], "default"
    source = {
        PARAM: "param kafka_config_ids",
        VARIABLE: f"Variable {CLUSTERS_VARIABLE}",
        ENVIRONMENT: f"environment {CLUSTERS_ENV}",
    }[layer]
    where = "the run's kafka_config_ids param" if layer == PARAM else source
    return parse_clusters(raw, where), source


def probe_conn_id(kafka_config_id: str, default: str = DEFAULT_PROBE) -> str:
    """The metrics (probe) connection of a cluster: the default one for ``kafka_default``, else ``<id>_probe``."""
    return default if kafka_config_id == DEFAULT_CLUSTER else f"{kafka_config_id}_probe"


DEFAULT_CONNECT = "kafka_connect_default"
CONNECT_EXTRA = "connect_conn_ids"  # key of a Kafka connection's extra naming its Connect clusters


def connect_conn_ids_of(kafka_config_id: str, extra: dict[str, Any] | None) -> list[str]:
    """The Connect clusters working for a Kafka cluster, as Airflow http connection ids.

    The Kafka connection's extra names them (``"connect_conn_ids": ["connect_eu1"]`` or a
    comma list): the one place that already belongs to that cluster, so adding a cluster is
    one connection. Without the key, ``kafka_default`` has ``kafka_connect_default`` and any
    other cluster has none (a Connect cluster is never guessed from a name).
    """
    raw = (extra or {}).get(CONNECT_EXTRA)
    if raw is None:
        return [DEFAULT_CONNECT] if kafka_config_id == DEFAULT_CLUSTER else []
    source = f"extra {CONNECT_EXTRA!r} of connection {kafka_config_id}"
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list) or any(not isinstance(i, str) or not _CONN_ID.match(i.strip()) for i in raw):
        raise FleetSettingError(f"{source} must be a list of connection ids, not {raw!r}")
    return list(dict.fromkeys(i.strip() for i in raw))


def connect_groups(clusters: list[str], extras: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per Kafka cluster: the Connect clusters its sweep covers, or why none can be.

    ``extras[cluster]`` is the Kafka connection's extra, or an Exception when it could not be
    read (that cluster's sweep reports it; the others go on). A Connect cluster named by two
    Kafka clusters is swept once, under the first, and the second reports the clash (two
    sweeps would restart its connectors twice).
    """
    claimed: dict[str, str] = {}
    groups = []
    for cluster in clusters:
        entry: dict[str, Any] = {
            "kafka_config_id": cluster,
            "connect_conn_ids": [],
            "error": None,
            "shared": {},
        }
        extra = extras.get(cluster)
        try:
            if isinstance(extra, Exception):
                raise extra
            named = connect_conn_ids_of(cluster, extra)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            groups.append(entry)
            continue
        for conn_id in named:
            if conn_id in claimed:
                entry["shared"][conn_id] = claimed[conn_id]
            else:
                claimed[conn_id] = cluster
                entry["connect_conn_ids"].append(conn_id)
        groups.append(entry)
    return groups
