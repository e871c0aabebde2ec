"""The secured local stack's settings, certificates and credentials, without starting a JVM (issue #38, 1).

What the nodes are given is read back from the properties the stack renders and the files it
makes; that Kafka accepts them is tests/integration/test_secured_stack.py's (a real stack).
"""

from __future__ import annotations

import json
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

from kafka_runbooks.acl_table import all_needed
from kafka_runbooks_dev.localstack import LocalStack, Topology, security
from kafka_runbooks_dev.localstack.topology import CONTROLLER


@pytest.fixture
def stack(tmp_path) -> LocalStack:
    return LocalStack(home=tmp_path / "s", topology=Topology(brokers=3, controllers=1, security="sasl_ssl"))


def test_the_security_mode_is_checked_and_read_from_the_environment():
    with pytest.raises(ValueError, match="security 'kerberos' is not one of none, sasl_ssl"):
        Topology(security="kerberos")
    assert Topology.from_env({"KR_STACK_SECURITY": "SASL_SSL"}).secured
    assert not Topology.from_env({}).secured
    assert Topology.from_json(Topology(security="sasl_ssl").to_json()).security == "sasl_ssl"


def test_brokers_listen_on_sasl_ssl_and_mtls_with_the_authorizer_and_one_super_user(stack):
    props = stack._properties(stack.node(1))
    assert props["listeners"] == "SASL_SSL://127.0.0.1:19091,SSL://127.0.0.1:19141"
    assert props["advertised.listeners"] == props["listeners"]
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL,SSL:SSL"
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    assert (
        props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    )
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert 'username="admin"' in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert props["min.insync.replicas"] == "2"  # the plain stack's settings stay


def test_controllers_take_only_mtls_and_authorize_too(stack):
    props = stack._properties(stack.node(9001))
    assert props["listeners"] == "CONTROLLER://127.0.0.1:19191"
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["super.users"] == "User:admin"


def test_a_plain_stack_is_as_it_was(tmp_path):
    plain = LocalStack(home=tmp_path / "p", topology=Topology(brokers=3, controllers=1))
    props = plain._properties(plain.node(1))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19091"
    assert "authorizer.class.name" not in props and "super.users" not in props
    assert security.format_args(plain, plain.node(9001)) == [] and security.connect_auth(plain) is None
    assert plain.client_config() == {"bootstrap.servers": plain.bootstrap_servers}
    assert not (tmp_path / "p" / "security").exists()


def test_connect_is_a_sasl_ssl_client_with_basic_auth_on_its_rest_api(stack):
    props = stack._properties(stack.topology.connect_node)
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[f"{prefix}security.protocol"] == "SASL_SSL"
        assert props[f"{prefix}sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["rest.extension.classes"].endswith("BasicAuthSecurityRestExtension")
    (flag,) = security.jvm_flags(stack, stack.topology.connect_node)
    jaas = flag.split("=", 1)[1]
    assert "PropertyFileLoginModule" in Path(jaas).read_text()
    user, password = security.connect_auth(stack)
    users = (security.folder(stack) / "connect-users.properties").read_text()
    assert users == f"{user}: {password}\n"


def test_scram_users_are_written_at_format_time_on_the_controllers_only(stack):
    args = security.format_args(stack, stack.node(9001))
    pw = security.passwords(stack)
    assert args == [
        "--add-scram",
        f"SCRAM-SHA-512=[name=admin,password={pw['admin']}]",
        "--add-scram",
        f"SCRAM-SHA-512=[name=runbooks,password={pw['runbooks']}]",
    ]
    assert security.format_args(stack, stack.node(1)) == []
    assert stack.node(9001).role == CONTROLLER


def test_the_certificates_chain_to_the_ca_and_the_secrets_are_the_owners_alone(stack):
    home = security.ensure_material(stack)
    pw = security.passwords(stack)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for f in home.iterdir():
        if f.name != ".lock":
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    key, cert, cas = pkcs12.load_key_and_certificates(
        (home / "node.p12").read_bytes(), pw["node_key"].encode()
    )
    assert cert.subject.rfc4514_string() == "CN=admin"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate((home / "ca.crt").read_bytes())
    assert cert.issuer == ca.subject and [c.subject for c in cas] == [ca.subject]
    runbooks = x509.load_pem_x509_certificate((home / "runbooks.crt").read_bytes())
    assert runbooks.subject.rfc4514_string() == "CN=runbooks" and runbooks.issuer == ca.subject
    with pytest.raises(TypeError):  # encrypted: useless without its password
        load_pem_private_key((home / "runbooks.key").read_bytes(), None)
    load_pem_private_key((home / "runbooks.key").read_bytes(), pw["runbooks_key"].encode())
    context = ssl.create_default_context(cafile=str(home / "ca.crt"))  # what kafka-python loads
    context.load_cert_chain(str(home / "runbooks.crt"), str(home / "runbooks.key"), pw["runbooks_key"])
    assert security.ensure_material(stack) == home and security.passwords(stack) == pw  # made once


def test_the_runbooks_connections_carry_its_credentials_and_nothing_else(stack):
    sasl = stack.client_config()
    assert (sasl["security.protocol"], sasl["sasl.username"]) == ("SASL_SSL", "runbooks")
    assert sasl["bootstrap.servers"] == "127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093"
    mtls = stack.client_config(auth="mtls")
    assert mtls["security.protocol"] == "SSL" and mtls["bootstrap.servers"].startswith("127.0.0.1:19141")
    conns = stack.airflow_connections(kafka_auth="mtls")
    assert conns["kafka_default"]["extra"] == mtls
    assert conns["kafka_connect_default"]["login"] == "runbooks"
    assert json.dumps(stack.airflow_connections()["kafka_default"]["extra"]) == json.dumps(sasl)


def test_the_runbooks_principal_is_granted_exactly_the_table(stack):
    bindings = security.acl_bindings()
    assert {(b.resource_pattern.resource_type.name, b.operation.name) for b in bindings} == {
        (a.resource, a.operation) for a in all_needed()
    }
    assert {b.principal for b in bindings} == {"User:runbooks"}
    assert {b.resource_pattern.resource_name for b in bindings} == {"kafka-cluster", "*"}


def _fetch_refusing(calls: list, error: str):
    def fetch(stack):
        calls.append(stack.kafka_version)
        raise security.StackError(error)

    return fetch


def test_a_secured_stack_whose_basic_auth_extension_is_not_served_lacks_its_connect_worker(
    stack, monkeypatch
):
    calls: list = []
    monkeypatch.setattr(security, "_SERVED", {})
    monkeypatch.setattr(security, "connect_jars", _fetch_refusing(calls, "Maven: ... is not served"))
    assert stack.connect_url is None
    [missing] = stack.lacking()
    assert missing.part == "the Connect worker"
    assert missing.artifact == f"org.apache.kafka:connect-basic-auth-extension:{stack.kafka_version}"
    assert missing.line().startswith(f"Kafka {stack.kafka_version}: org.apache.kafka:connect-basic-auth")
    assert "no Connect worker is started" in missing.line()
    assert calls == [stack.kafka_version]  # Maven asked once for the release, not at every read


def test_any_other_failure_to_fetch_the_extension_is_raised_and_a_plain_stack_never_asks(
    stack, tmp_path, monkeypatch
):
    calls: list = []
    monkeypatch.setattr(security, "_SERVED", {})
    monkeypatch.setattr(security, "connect_jars", _fetch_refusing(calls, "Maven (mvn) is not on PATH"))
    with pytest.raises(security.StackError, match="not on PATH"):
        stack.lacking()
    plain = LocalStack(home=tmp_path / "plain", topology=Topology(brokers=3, controllers=1))
    assert security.missing(plain) == [] and len(calls) == 1
    served = LocalStack(
        home=tmp_path / "served", topology=Topology(brokers=3, controllers=1, security="sasl_ssl")
    )
    monkeypatch.setattr(security, "connect_jars", lambda s: [tmp_path / "connect-basic-auth-extension.jar"])
    assert security.missing(served) == [] and served.connect_url == served.topology.connect_url
