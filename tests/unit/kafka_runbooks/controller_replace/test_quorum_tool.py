"""kafka-metadata-quorum's failures mapped once, from the tool's output as Kafka 4.3.1 printed it."""

from __future__ import annotations

import pytest

from kafka_runbooks._kafka_python import kafka_uuid
from kafka_runbooks.controller_replace.quorum_tool import ControllerEndpoint, find_classpath, kafka_error
from kafka_runbooks.errors import BadInput

DUPLICATE = (
    "org.apache.kafka.common.errors.DuplicateVoterException: The voter id for ReplicaKey(id=9004, "
    "directoryId=VIFWfeVWOOjTkQFcigjixQ) is already part of the set of voters [...].\n"
    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.DuplicateVoterException: The voter id"
    " for ReplicaKey(id=9004, directoryId=VIFWfeVWOOjTkQFcigjixQ) is already part of the set of voters [...].\n"
)
NOT_AN_OBSERVER = (
    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.TimeoutException: Aborted add voter "
    "operation for since API_VERSIONS returned an error BROKER_NOT_AVAILABLE\n"
)


def test_kafkas_exception_name_is_read_from_the_tool_output():
    assert kafka_error(DUPLICATE)[0] == "DuplicateVoterException"
    name, message = kafka_error(NOT_AN_OBSERVER)
    assert name == "TimeoutException" and "BROKER_NOT_AVAILABLE" in message
    assert kafka_error("usage: kafka-metadata-quorum ...\nerror: unrecognized arguments")[0] is None


def test_directory_ids_are_written_as_kafka_writes_them():
    """kafka-python answers a dashed UUID; meta.properties and the tool use base64url (seen: the same id)."""
    assert kafka_uuid("e76dff0f-4af9-4c50-9d47-b5d465b76ade") == "523_D0r5TFCdR7XUZbdq3g"
    assert kafka_uuid("00000000-0000-0000-0000-000000000000") is None and kafka_uuid(None) is None


def test_endpoints_and_libs_are_checked_before_any_call(tmp_path):
    assert str(ControllerEndpoint.parse("CONTROLLER://ctl4:9093")) == "CONTROLLER://ctl4:9093"
    with pytest.raises(BadInput):
        ControllerEndpoint.parse("ctl4:9093")
    with pytest.raises(BadInput, match="no kafka-tools jar"):
        find_classpath(tmp_path)


def test_a_sasl_ssl_connections_librdkafka_login_reaches_the_java_tool():
    """The Kafka connection's extras are librdkafka's keys (docs/connections.md): the tool's Java
    Admin client got no login and the JVM's default truststore from them, so it could not reach a
    SASL_SSL cluster the runbooks' other requests reach (issue #38)."""
    from kafka_runbooks.controller_replace.quorum_tool import java_client_properties

    props = java_client_properties(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "runbooks",
            "sasl.password": "pw-1",
            "ssl.ca.location": "/secrets/ca.crt",
        }
    )
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="runbooks" password="pw-1";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/secrets/ca.crt",
    }
    own = java_client_properties(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": "X required;", "sasl.username": "u"}
    )
    assert own["sasl.jaas.config"] == "X required;"  # the connection's own JAAS line wins
