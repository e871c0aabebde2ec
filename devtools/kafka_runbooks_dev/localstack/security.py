"""The local stack, secured: ``Topology(security="sasl_ssl")`` (``KR_STACK_SECURITY=sasl_ssl``).

What a secured stack runs, so the runbooks meet a broker that authenticates and authorizes:

- brokers: a ``SASL_SSL`` listener (SCRAM-SHA-512) at their port, their inter-broker listener
  too, and an ``SSL`` listener at the port + 50 that requires a client certificate (mTLS, the
  principal its CN); controllers: their ``CONTROLLER`` listener on mTLS; the StandardAuthorizer on
  every broker and controller, ``allow.everyone.if.no.acl.found=false`` and one super user, the
  stack's own ``admin`` (brokers and controllers present its certificate, brokers log in to each
  other as it, the Connect worker and the stack's tooling use it);
- ``runbooks``: the least-privilege principal the runbooks connect as, a SCRAM user and a client
  certificate alike (``User:runbooks``), granted exactly the ACLs
  :func:`kafka_runbooks.acl_table.all_needed` lists once the brokers run (:func:`grant`);
- Kafka Connect's REST API behind HTTP basic auth (``BasicAuthSecurityRestExtension``, a JAAS
  file naming a password file), the worker a SASL_SSL client of the brokers as ``admin``.

The JMX exporters stay as they are (HTTP on loopback). Everything secret is made once per stack,
under ``<home>/security/`` (mode 0700, files 0600; ``.stack`` is git-ignored): a CA, the nodes'
PKCS12 keystore, the runbooks' PEM certificate and encrypted key, and ``secrets.json`` with every
password. SCRAM credentials are written at format time (``kafka-storage format --add-scram`` on
the controllers, which every release the stack runs accepts). Nothing here logs a secret.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_runbooks.acl_table import CLUSTER, all_needed
from kafka_runbooks_dev.localstack.jars import CONNECT_WORKER, LIB_ROOT, Missing, StackError, fetch_with_maven
from kafka_runbooks_dev.localstack.topology import CONNECT, CONTROLLER, LOOPBACK, Node, Topology

if TYPE_CHECKING:  # the stack imports this module: a type only, no import at run time
    from kafka_runbooks_dev.localstack.stack import LocalStack

ADMIN = "admin"  # the stack's own principal, its only super user
RUNBOOKS = "runbooks"  # the principal the runbooks connect as, with exactly their ACLs
SCRAM = "SCRAM-SHA-512"
MTLS_PORT_OFFSET = 50  # a broker's SSL (mTLS) listener: its SASL_SSL port + 50
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# the certificates' subjects are "CN=<name>" alone: the principal is the name, as a SCRAM user's
PRINCIPAL_RULES = "RULE:^CN=(.*)$/$1/,DEFAULT"
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
FOLDER = "security"
SECRETS = "secrets.json"


def folder(stack: LocalStack) -> Path:
    """Where the stack's CA, keystores, keys and passwords live."""
    return stack.home / FOLDER


def mtls_port(node: Node) -> int:
    """A broker's SSL (mTLS) listener port."""
    return node.port + MTLS_PORT_OFFSET


def mtls_bootstrap(topology: Topology) -> str:
    """The brokers' mTLS listeners, as ``bootstrap.servers``."""
    return ",".join(f"{LOOPBACK}:{mtls_port(n)}" for n in topology.broker_nodes)


def passwords(stack: LocalStack) -> dict[str, str]:
    """The stack's passwords (made once): the SCRAM users', the keys' and Connect's REST user's."""
    return json.loads((ensure_material(stack) / SECRETS).read_text())


def ensure_material(stack: LocalStack) -> Path:
    """Make the CA, the certificates, the keystores, the passwords and Connect's JAAS files once
    (two processes at once: one makes them, the other waits); the folder."""
    home = folder(stack)
    if (home / SECRETS).exists():
        return home
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / SECRETS).exists():
            _make_material(home)
    return home


def _write_secret(path: Path, data: bytes | str) -> None:
    """Write a file only its owner can read (created so: never readable by others, even briefly)."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(raw)


def _make_material(home: Path) -> None:
    """The CA, the nodes' keystore (CN=admin: the super user), the runbooks' certificate and key,
    Connect's password and JAAS files; ``secrets.json`` last (its presence says all is there)."""
    from cryptography.hazmat.primitives import serialization

    pw = {
        name: secrets.token_urlsafe(18) for name in (ADMIN, RUNBOOKS, "node_key", "runbooks_key", "connect")
    }
    ca_key, ca_cert = _certificate("kafka-runbooks local stack CA", None, ca=True)
    _write_secret(home / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM))
    node_key, node_cert = _certificate(ADMIN, (ca_key, ca_cert), server=True)
    _write_secret(home / "node.p12", _pkcs12(node_key, node_cert, ca_cert, pw["node_key"]))
    key, cert = _certificate(RUNBOOKS, (ca_key, ca_cert))
    _write_secret(home / "runbooks.crt", cert.public_bytes(serialization.Encoding.PEM))
    encryption = serialization.BestAvailableEncryption(pw["runbooks_key"].encode())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    _write_secret(home / "runbooks.key", pem)
    _write_secret(home / "connect-users.properties", f"{RUNBOOKS}: {pw['connect']}\n")
    jaas = f'KafkaConnect {{\n  {LOGIN_MODULE} required\n  file="{home / "connect-users.properties"}";\n}};\n'
    _write_secret(home / "connect-jaas.conf", jaas)
    _write_secret(home / SECRETS, json.dumps(pw, indent=2))


def _certificate(name: str, issuer: tuple | None, ca: bool = False, server: bool = False):
    """An RSA key and a certificate for ``CN=<name>``: self-signed for the CA, else signed by
    ``issuer`` (key, cert); a server's carries 127.0.0.1 and localhost (hostname verification)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer_key, signer = (key, None) if issuer is None else issuer
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if signer is None else signer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        names = [x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(signer_key, hashes.SHA256())


def _pkcs12(key, cert, ca_cert, password: str) -> bytes:
    """A PKCS12 keystore (AES-256, as JDK 17's own) with the key, its certificate and the CA."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.serialization import PrivateFormat, pkcs12

    encryption = (
        PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(10000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )
    return pkcs12.serialize_key_and_certificates(ADMIN.encode(), key, cert, [ca_cert], encryption)


# ---------------------------------------------------------------- node properties


def secured(stack: LocalStack, node: Node, plain: dict[str, str]) -> dict[str, str]:
    """A node's properties with the secured stack's listeners, authentication and authorizer."""
    home, pw = folder(stack), passwords(stack)
    if node.role == CONNECT:
        return {**plain, **_connect(stack, pw)}
    tls = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(home / "node.p12"),
        "ssl.keystore.password": pw["node_key"],
        "ssl.key.password": pw["node_key"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(home / "ca.crt"),
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }
    if node.role == CONTROLLER:
        return {
            **plain,
            **tls,
            "listener.security.protocol.map": "CONTROLLER:SSL",
            "listener.name.controller.ssl.client.auth": "required",
        }
    listeners = f"SASL_SSL://{node.address},SSL://{LOOPBACK}:{mtls_port(node)}"
    return {
        **plain,
        **tls,
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "CONTROLLER:SSL,SASL_SSL:SASL_SSL,SSL:SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": _scram_jaas(ADMIN, pw[ADMIN]),
        "listener.name.ssl.ssl.client.auth": "required",
    }


def _scram_jaas(user: str, password: str) -> str:
    return f'{SCRAM_LOGIN} required username="{user}" password="{password}";'


def _connect(stack: LocalStack, pw: dict[str, str]) -> dict[str, str]:
    """The Connect worker: a SASL_SSL client as ``admin`` (its own clients, and its connectors'
    producers, consumers and admin clients: Connect gives those only their prefixed settings), its
    REST API behind basic auth."""
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM,
        "sasl.jaas.config": _scram_jaas(ADMIN, pw[ADMIN]),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(folder(stack) / "ca.crt"),
    }
    prefixed = {f"{p}.{k}": v for p in ("producer", "consumer", "admin") for k, v in client.items()}
    return {**client, **prefixed, "rest.extension.classes": BASIC_AUTH_EXTENSION}


def format_args(stack: LocalStack, node: Node) -> list[str]:
    """``kafka-storage format``'s SCRAM credentials (``--add-scram``) for a controller of a secured
    stack: the admin (the brokers log in to each other with it) and the runbooks; none otherwise."""
    if not stack.topology.secured or node.role != CONTROLLER:
        return []
    pw = passwords(stack)
    return [
        arg
        for user in (ADMIN, RUNBOOKS)
        for arg in ("--add-scram", f"{SCRAM}=[name={user},password={pw[user]}]")
    ]


def jvm_flags(stack: LocalStack, node: Node) -> list[str]:
    """The Connect worker's JAAS file (its REST API's basic auth); nothing for the other nodes."""
    if not stack.topology.secured or node.role != CONNECT:
        return []
    return [f"-Djava.security.auth.login.config={ensure_material(stack) / 'connect-jaas.conf'}"]


def connect_jars(stack: LocalStack) -> list[Path]:
    """The basic-auth REST extension's jar for a secured stack's Connect worker (fetched once per
    release into ``.stack/connect-auth-<version>``: the stack's own jars stay as they are)."""
    if not stack.topology.secured:
        return []
    version = stack.kafka_version
    lib = LIB_ROOT / f"connect-auth-{version}"
    pom = lib.with_name(lib.name + ".pom.xml")
    text = _EXTENSION_POM.replace("VERSION", version)
    if not pom.exists() or pom.read_text() != text:
        pom.parent.mkdir(parents=True, exist_ok=True)
        pom.write_text(text)
    fetch_with_maven(pom, lib, _EXTENSION_NAME.format(version=version))
    found = sorted(lib.glob("connect-basic-auth-extension-*.jar"))
    if not found:
        raise StackError(f"no connect-basic-auth-extension jar for Kafka {version} in {lib}")
    return found


_EXTENSION_NAME = "Connect's basic-auth extension {version}"
_EXTENSION_ARTIFACT = "org.apache.kafka:connect-basic-auth-extension:{version}"


def missing(stack: LocalStack) -> list[Missing]:
    """What a secured stack with a Connect worker lacks beyond its release's jars: the basic-auth
    extension, when Maven does not serve it (3.9.2's, 4.2.2's and 4.4.0's are refused here). Its worker is
    then not started, as for a release whose Connect jars are not served: one without the
    extension would answer its REST API unauthenticated. Said at start and in ``kstack status``
    (:meth:`LocalStack.lacking`)."""
    if not (stack.topology.secured and stack.topology.connect):
        return []
    return [] if _extension_served(stack) else [_extension_missing(stack.kafka_version)]


#: release -> whether its extension was served: Maven is asked once per release and process
_SERVED: dict[str, bool] = {}


def _extension_served(stack: LocalStack) -> bool:
    """Whether the extension's jar is here or fetched now; any failure but "not served" is raised
    (only "not served" may leave a part out)."""
    version = stack.kafka_version
    if version not in _SERVED:
        try:
            connect_jars(stack)
            _SERVED[version] = True
        except StackError as exc:
            if "not served" not in str(exc):
                raise
            _SERVED[version] = False
    return _SERVED[version]


def _extension_missing(version: str) -> Missing:
    return Missing(
        part=CONNECT_WORKER,
        artifact=_EXTENSION_ARTIFACT.format(version=version),
        release=version,
        without="no Connect worker is started (a secured stack's Connect REST API needs its basic-auth extension)",
    )


_EXTENSION_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-runbooks</groupId>
  <artifactId>connect-auth</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-basic-auth-extension</artifactId>
      <version>VERSION</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
"""


# ---------------------------------------------------------------- clients


def connect_auth(stack: LocalStack) -> tuple[str, str] | None:
    """Connect's REST basic-auth user and password on a secured stack, None otherwise."""
    return (RUNBOOKS, passwords(stack)["connect"]) if stack.topology.secured else None


def client_config(stack: LocalStack, principal: str = RUNBOOKS, auth: str = "sasl_ssl") -> dict[str, Any]:
    """librdkafka client settings (an Airflow Kafka connection's extras) for ``principal``:
    ``sasl_ssl`` (SCRAM-SHA-512 on the brokers' ports) or ``mtls`` (the runbooks' certificate on
    the SSL listeners); the plain bootstrap servers on a stack that is not secured."""
    if not stack.topology.secured:
        return {"bootstrap.servers": stack.bootstrap_servers}
    home = ensure_material(stack)
    ca = {"ssl.ca.location": str(home / "ca.crt")}
    if auth == "mtls":
        if principal != RUNBOOKS:
            raise StackError(f"only the {RUNBOOKS} principal has a client certificate")
        return {
            "bootstrap.servers": mtls_bootstrap(stack.topology),
            "security.protocol": "SSL",
            **ca,
            "ssl.certificate.location": str(home / "runbooks.crt"),
            "ssl.key.location": str(home / "runbooks.key"),
            "ssl.key.password": passwords(stack)["runbooks_key"],
        }
    if auth != "sasl_ssl":
        raise StackError(f"auth {auth!r} is not sasl_ssl or mtls")
    return {
        "bootstrap.servers": stack.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM,
        "sasl.username": principal,
        "sasl.password": passwords(stack)[principal],
        **ca,
    }


def acl_bindings(principal: str = RUNBOOKS) -> list:
    """kafka-python ALLOW ACLs for ``principal``: one per ACL some runbook needs (the table)."""
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    from kafka.admin import ACLResourcePatternType as Pattern

    return [
        ACL(
            principal=f"User:{principal}",
            host="*",
            operation=ACLOperation[acl.operation],
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(
                ResourceType.CLUSTER if acl.resource == CLUSTER else ResourceType.TOPIC,
                acl.resource_name,
                Pattern.LITERAL,
            ),
        )
        for acl in all_needed()
    ]


def grant(stack: LocalStack) -> None:
    """Give the runbooks' principal exactly the table's ACLs (as the admin; creating an ACL that
    exists changes nothing): done at every start of a secured stack, once its brokers run."""
    from kafka.admin import KafkaAdminClient

    from kafka_runbooks import client_config as librdkafka

    admin = KafkaAdminClient(
        **librdkafka.to_kafka_python(client_config(stack, ADMIN)), request_timeout_ms=30000
    )
    try:
        answer = admin.create_acls(acl_bindings())
    finally:
        admin.close()
    if answer.get("failed"):
        raise StackError(f"could not grant the runbooks' ACLs: {answer['failed']}")
