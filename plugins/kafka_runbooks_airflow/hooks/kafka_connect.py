"""Hook: a Kafka Connect REST client built from an Airflow ``http`` connection.

The connection (``kafka_connect_default`` by default): host = the worker's REST URL (or a
host name with ``schema`` as the scheme, and ``port``); login/password = basic auth when
the worker needs it; extras ``verify`` (true/false or a CA bundle path), ``cert``/``key``
(client certificate paths) and ``timeout`` (seconds). The client is built on first use;
the password stays in its HTTP session and is never logged. Optional extras ``status_topic``
(the workers' ``status.storage.topic``) and ``kafka_config_id`` (the Kafka connection of the
cluster that holds it, ``kafka_default`` if not given) let a restart read what the workers wrote
since it (:mod:`kafka_runbooks.connect.status_log`): one that fails again at once ends at once.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from kafka_runbooks.connect.client import ConnectClient, client_from_fields
from kafka_runbooks.connect.status_log import StatusLog
from kafka_runbooks.errors import BadInput


class KafkaConnectHook(BaseHook):
    """Talk to one Kafka Connect cluster through its REST API.

    :param kafka_connect_conn_id: Airflow connection of type ``http``.
    :param timeout_s: per-request timeout unless the connection's ``timeout`` extra says otherwise.
    """

    conn_name_attr = "kafka_connect_conn_id"
    default_conn_name = "kafka_connect_default"
    conn_type = "http"
    hook_name = "Kafka Connect (runbooks)"

    def __init__(self, kafka_connect_conn_id: str = default_conn_name, timeout_s: float = 30.0) -> None:
        super().__init__()
        if not kafka_connect_conn_id:
            raise BadInput("kafka_connect_conn_id must name an Airflow connection")
        self.kafka_connect_conn_id = kafka_connect_conn_id
        self.timeout_s = timeout_s

    def get_conn(self) -> ConnectClient:
        """A Connect REST client from the connection (URL, auth and TLS from its fields and extras)."""
        conn = self.get_connection(self.kafka_connect_conn_id)
        extra: dict[str, Any] = conn.extra_dejson or {}
        return client_from_fields(
            conn.host,
            port=conn.port,
            schema=conn.schema,
            login=conn.login,
            password=conn.password,
            extra=extra,
            timeout_s=self.timeout_s,
        )

    def get_status_log(self) -> StatusLog | None:
        """The workers' status topic, read from its Kafka cluster, when the extras name it (else None)."""
        from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

        extra: dict[str, Any] = self.get_connection(self.kafka_connect_conn_id).extra_dejson or {}
        topic = extra.get("status_topic")
        if not topic:
            return None
        kafka_config = KafkaAdminHook(extra.get("kafka_config_id") or "kafka_default").client_config()
        return StatusLog.from_kafka_config(str(topic), kafka_config)

    @cached_property
    def client(self) -> ConnectClient:
        """The hook's client, made once."""
        return self.get_conn()
