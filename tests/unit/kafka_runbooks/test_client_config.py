import pytest

from kafka_runbooks.client_config import ClientConfigError, redact, require_bootstrap, to_kafka_python


def test_sasl_ssl_settings_mean_the_same_to_kafka_python():
    conf = {
        "bootstrap.servers": "b1:9093, b2:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ops",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/ca.pem",
        "linger.ms": 5,
    }
    out = to_kafka_python(conf)
    assert out["bootstrap_servers"] == ["b1:9093", "b2:9093"]
    assert out["security_protocol"] == "SASL_SSL"
    assert out["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (out["sasl_plain_username"], out["sasl_plain_password"]) == ("ops", "s3cret")
    assert out["ssl_cafile"] == "/etc/ca.pem"
    assert "linger.ms" not in out and "linger_ms" not in out


def test_mtls_settings():
    out = to_kafka_python(
        {
            "bootstrap.servers": "b:9094",
            "security.protocol": "SSL",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kp",
        }
    )
    assert (out["ssl_certfile"], out["ssl_keyfile"], out["ssl_password"]) == ("/c.pem", "/k.pem", "kp")


def test_oauthbearer_is_refused_with_the_key_named():
    with pytest.raises(ClientConfigError, match="sasl.oauthbearer.config"):
        to_kafka_python({"bootstrap.servers": "b:9092", "sasl.oauthbearer.config": "x"})


def test_missing_bootstrap_is_a_clear_error():
    with pytest.raises(ClientConfigError, match="bootstrap.servers"):
        require_bootstrap({"security.protocol": "SSL"})


def test_redact_masks_every_secret():
    red = redact(
        {
            "bootstrap.servers": "b:1",
            "sasl.password": "p",
            "ssl.key.password": "k",
            "sasl.jaas.config": "j",
            "sasl.username": "u",
        }
    )
    assert red == {
        "bootstrap.servers": "b:1",
        "sasl.jaas.config": "***",
        "sasl.password": "***",
        "ssl.key.password": "***",
        "sasl.username": "u",
    }
