"""Kafka client settings, as Airflow's Kafka connection stores them (librdkafka keys).

The admin facade sends every RPC through kafka-python (the client that lets it choose the
broker a request goes to), so the dict is translated here, in one place, and SASL and TLS
settings mean what they mean to librdkafka. Secrets are redacted before anything is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks.errors import BadInput

SECRET_MARKERS = ("password", "secret", "token", "jaas", "key.pem", "private")

# librdkafka key -> kafka-python KafkaAdminClient keyword
_TO_KAFKA_PYTHON = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
}
# Settings that only tune librdkafka and have no meaning for kafka-python.
_LIBRDKAFKA_ONLY = {
    "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm",
    "socket.timeout.ms",
    "topic.metadata.refresh.interval.ms",
    "metadata.max.age.ms",
    "log_level",
    "debug",
    "group.id",
    "logger",
    "error_cb",
    "throttle_cb",
    "stats_cb",
    "log_cb",
}


class ClientConfigError(BadInput):
    """The connection's client config cannot be used; the message names the key."""


def require_bootstrap(config: dict[str, Any]) -> str:
    """The connection's ``bootstrap.servers``; ClientConfigError when it has none (nothing to connect to)."""
    servers = str(config.get("bootstrap.servers") or "").strip()
    if not servers:
        raise ClientConfigError("the Kafka connection has no 'bootstrap.servers' in its extras")
    return servers


def to_kafka_python(config: dict[str, Any]) -> dict[str, Any]:
    """Translate librdkafka settings into KafkaAdminClient keywords, refusing what it can't honour."""
    require_bootstrap(config)
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in _TO_KAFKA_PYTHON:
            target = _TO_KAFKA_PYTHON[key]
            if target == "bootstrap_servers":
                value = [s.strip() for s in str(value).split(",") if s.strip()]
            elif target.endswith("_ms"):
                value = int(value)
            elif target == "sasl_mechanism" or target == "security_protocol":
                value = str(value).upper()
            out[target] = value
        elif key == "enable.ssl.certificate.verification" and str(value).lower() == "false":
            out["ssl_check_hostname"] = False
        elif key in _LIBRDKAFKA_ONLY:
            continue
        elif key == "oauth_cb" or key.startswith("sasl.oauthbearer"):
            raise ClientConfigError(
                f"'{key}': OAUTHBEARER is not supported for the kafka-python RPCs "
                "(reassignments, log dirs, quorum); use SASL/SCRAM, PLAIN or mTLS"
            )
        # any other key is a librdkafka tuning knob; kafka-python does without it
    if out.get("sasl_mechanism", "").startswith("SCRAM"):
        out["sasl_plain_username"] = config.get("sasl.username")
        out["sasl_plain_password"] = config.get("sasl.password")
    return out


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """A copy safe to log: every value whose key looks secret is masked."""
    return {
        k: ("***" if any(m in k.lower() for m in SECRET_MARKERS) else v) for k, v in sorted(config.items())
    }


class _MaskedConfig(logging.Filter):
    """kafka-python logs its admin client's whole configuration at DEBUG, the SASL password and
    key password in clear ("Starting KafkaAdminClient with configuration: {...}"; seen on the
    secured stack): the dict is masked before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the secrets of a dict argument; the line itself is always kept."""
        if isinstance(record.args, tuple) and record.args and isinstance(record.args[0], dict):
            record.args = (redact(record.args[0]), *record.args[1:])
        elif isinstance(record.args, dict):
            record.args = redact(record.args)
        return True


logging.getLogger("kafka.admin.client").addFilter(_MaskedConfig())
