"""The Strimzi-agent probe over real mutual TLS, against a local HTTPS server that speaks
KafkaAgent's wire format (``GET /v1/broker-state``) and requires a client certificate.
(Strimzi's agent is not published to Maven Central, so its API is served here.)"""

from __future__ import annotations

import datetime
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from kafka_runbooks.probes import StrimziAgentProbe, probe_from_config

ANSWERS = {
    "/v1/broker-state/1": (
        200,
        {
            "brokerState": 2,
            "recoveryState": {"remainingLogsToRecover": 12, "remainingSegmentsToRecover": 345},
        },
    ),
    "/v1/broker-state/2": (
        200,
        {"brokerState": 2, "recovery": {"remainingLogsToRecover": 1, "remainingSegmentsToRecover": 2}},
    ),
    "/v1/broker-state/3": (200, {"brokerState": 3}),
    "/v1/broker-state/4": (404, {"error": "not found"}),
    "/v1/broker-state/5": (503, {"error": "metrics unavailable"}),
    "/v1/broker-state/7": (200, {"brokerState": 2, "recoveryState": "unavailable"}),
    "/v1/broker-state/8": (200, ["brokerState", 3]),
}


def _pki(tmp: Path) -> dict[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def key():
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test-ca"))
        .issuer_name(name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn, san=None):
        k = key()
        b = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if san:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
        return k, b.sign(ca_key, hashes.SHA256())

    files = {}
    for label, (k, cert) in {
        "server": leaf("localhost", "localhost"),
        "client": leaf("cluster-operator"),
    }.items():
        files[f"{label}_key"] = tmp / f"{label}.key"
        files[f"{label}_cert"] = tmp / f"{label}.crt"
        files[f"{label}_key"].write_bytes(
            k.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        files[f"{label}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["ca"] = tmp / "ca.crt"
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return {k: str(v) for k, v in files.items()}


class _Agent(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server API)
        status, body = ANSWERS.get(self.path, (404, {"error": "unknown API version"}))
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    pki = _pki(tmp_path_factory.mktemp("pki"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["server_cert"], pki["server_key"])
    ctx.load_verify_locations(pki["ca"])
    ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: no client certificate, no answer
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}", pki
    server.shutdown()


def _probe(agent) -> StrimziAgentProbe:
    base, pki = agent
    return StrimziAgentProbe(
        base + "/v1/broker-state/{node_id}", pki["client_cert"], pki["client_key"], pki["ca"]
    )


def test_recovery_state_is_read_with_either_field_name(agent):
    probe = _probe(agent)
    r1 = probe.read(1)
    assert (r1.state, r1.remaining_logs, r1.remaining_segments, r1.recovering) == (2, 12, 345, True)
    r2 = probe.read(2)
    assert (r2.remaining_logs, r2.remaining_segments, r2.recovering) == (1, 2, True)
    r3 = probe.read(3)
    assert r3.running and not r3.recovering and r3.remaining_logs is None


@pytest.mark.parametrize("node,error", [(4, "HTTP 404"), (5, "HTTP 503"), (6, "HTTP 404")])
def test_non_200_answers_mean_unknown(agent, node, error):
    reading = _probe(agent).read(node)
    assert reading.state is None and not reading.known and reading.error == error
    assert not reading.recovering


def test_a_recovery_part_that_is_not_an_object_leaves_the_counts_unknown_not_the_state(agent):
    # issue 13: this answer made the probe raise AttributeError
    reading = _probe(agent).read(7)
    assert (reading.state, reading.remaining_logs, reading.remaining_segments) == (2, None, None)
    assert reading.recovering and not reading.counts_known
    other = _probe(agent).read(8)
    assert other.state is None and other.error.startswith("unexpected body")


def test_refused_connections_and_timeouts_mean_unknown(agent):
    _, pki = agent
    refused = StrimziAgentProbe(
        "https://localhost:1/v1/broker-state", pki["client_cert"], pki["client_key"], pki["ca"]
    ).read(1)
    assert refused.state is None and "ConnectionError" in refused.error


def test_the_agent_refuses_a_request_without_a_client_certificate(agent):
    base, pki = agent
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(base + "/v1/broker-state/3", verify=pki["ca"], timeout=5)
    # and the probe built from a connection's extras does present one
    probe = probe_from_config(
        {
            "kind": "strimzi-agent",
            "url_template": base + "/v1/broker-state/{node_id}",
            "cert_file": pki["client_cert"],
            "key_file": pki["client_key"],
            "ca_file": pki["ca"],
        }
    )
    assert probe.read(3).state == 3


def test_a_probe_config_missing_certificates_is_refused():
    with pytest.raises(ValueError, match="cert_file, key_file"):
        probe_from_config(
            {"kind": "strimzi-agent", "url_template": "https://x/v1/broker-state", "ca_file": "c"}
        )
