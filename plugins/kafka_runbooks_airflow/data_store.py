"""Credentials of the data store from an Airflow connection (``KAFKA_RUNBOOKS_DATA_CONN_ID``).

The domain library opens the store with fsspec (:mod:`kafka_runbooks.storage`); this turns
the named connection into fsspec options when a task first touches the store, so keys
live in Airflow's connection store (or its secrets backend), never in a URL, an env file
or a log line. Without the setting the store's own library finds credentials (for S3 the
AWS chain: IRSA on Kubernetes, an instance role, ``AWS_*`` variables).

Fields read, by protocol:

- ``s3``: login = access key id, password = secret access key; extra ``endpoint_url``
  (S3-compatible stores), ``region_name``, ``aws_session_token``.
- ``gs``: extra ``token`` (path of a service-account key file) and ``project``.
- ``abfs``/``az``: login = account name, password = account key; extra ``connection_string``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kafka_runbooks.storage import CONN_ENV


def options_from_connection(
    protocol: str, login: str | None, password: str | None, extra: Any
) -> dict[str, Any]:
    """fsspec options for ``protocol`` from a connection's fields (see the module docstring)."""
    extra = json.loads(extra) if isinstance(extra, str) and extra else (extra or {})
    if protocol == "s3":
        out: dict[str, Any] = {}
        if login:
            out["key"] = login
        if password:
            out["secret"] = password
        if extra.get("aws_session_token"):
            out["token"] = extra["aws_session_token"]
        client = {k: extra[k] for k in ("endpoint_url", "region_name") if extra.get(k)}
        if client:
            out["client_kwargs"] = client
        return out
    if protocol in ("gs", "gcs"):
        return {k: extra[k] for k in ("token", "project") if extra.get(k)}
    if protocol in ("abfs", "az", "abfss"):
        out = {}
        if login:
            out["account_name"] = login
        if password:
            out["account_key"] = password
        if extra.get("connection_string"):
            out["connection_string"] = extra["connection_string"]
        return out
    return {}


def connection_options(protocol: str) -> dict[str, Any]:
    """Options from the connection named by ``KAFKA_RUNBOOKS_DATA_CONN_ID``; none when unset."""
    conn_id = os.environ.get(CONN_ENV)
    if not conn_id:
        return {}
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return options_from_connection(protocol, conn.login, conn.password, conn.extra_dejson)
