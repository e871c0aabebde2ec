"""A cluster that nothing listens for fails fast and says so; a slow one keeps its deadlines.

Real sockets on loopback: a port bound but not listening refuses connections (the kernel
answers RST, as for a stopped broker); a port that listens and never answers is a hung broker
(its kernel completes the handshake, nothing reads the request).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.bootstrap import host_and_port, probe, until_one_listens
from kafka_runbooks.errors import ClusterUnreachable


def _bound() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture
def refusing() -> Iterator[str]:
    """A loopback port that refuses connections (bound, so nothing else takes it, never listening)."""
    sock = _bound()
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def refusing_too() -> Iterator[str]:
    """A second refusing port."""
    sock = _bound()
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback port that accepts connections and never answers (a hung broker)."""
    sock = _bound()
    sock.listen(8)
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _bootstrap_attempts(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("bootstrap through ")]


def test_a_cluster_whose_every_bootstrap_server_refuses_is_unreachable_saying_so(
    refusing, refusing_too, caplog
):
    """Before: a bootstrap deadline for both servers, then one for each alone (30 s of a sweep's
    task for a stopped two-broker cluster), and a timeout that did not say nothing listens."""
    caplog.set_level(logging.INFO, logger="kafka_runbooks.admin")
    admin = ClusterAdmin({"bootstrap.servers": f"{refusing},{refusing_too}"}, timeout_s=3)
    with pytest.raises(ClusterUnreachable) as raised:
        admin.ping()
    assert f"nothing listens at {refusing},{refusing_too}" in str(raised.value)
    assert "every bootstrap server refused the connection for 1 s" in str(raised.value)
    assert _bootstrap_attempts(caplog) == []  # no bootstrap deadline waited out, together or alone


def test_a_refusing_server_costs_no_bootstrap_attempt_and_a_hung_one_keeps_its_deadline(
    refusing, silent, caplog
):
    """A server that listens but does not answer is not called dead: it gets its attempt (and is
    reported as not answering); the refusing one beside it gets none and is named."""
    caplog.set_level(logging.INFO, logger="kafka_runbooks.admin")
    admin = ClusterAdmin({"bootstrap.servers": f"{refusing},{silent}"}, timeout_s=3)
    with pytest.raises(ClusterUnreachable) as raised:
        admin.ping()
    assert f"no broker of {refusing},{silent} answered" in str(raised.value)
    assert str(raised.value).endswith(f"; {refusing} refused the connection")
    assert [m.split(" failed")[0] for m in _bootstrap_attempts(caplog)] == [f"bootstrap through {silent}"]


def test_a_broker_that_starts_listening_within_the_deadline_is_not_called_dead(refusing):
    """A broker being restarted refuses for a moment: the probe asks again until the deadline."""
    sock = _bound()
    server = f"127.0.0.1:{sock.getsockname()[1]}"
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 1.0:
            sock.listen(1)  # the broker's listener is up, 1 s into the wait

    try:
        seen = until_one_listens([server], 5.0, step_s=0.25, clock=lambda: now[0], sleep=sleep)
        assert (seen.refused, seen.others, now[0]) == ((), (server,), 1.0)
        start = now[0]
        refused = until_one_listens([refusing], 2.0, step_s=0.25, clock=lambda: now[0], sleep=sleep)
        assert (refused.refused, refused.others, now[0] - start) == ((refusing,), (), 2.0)
    finally:
        sock.close()


def test_only_a_refused_connection_counts_as_nothing_listening(refusing, silent):
    """A name that does not resolve is unknown, not refused: it keeps its bootstrap attempt."""
    seen = probe([refusing, silent, "no-such-host.invalid:9092"], connect_timeout_s=1.0)
    assert seen.refused == (refusing,)
    assert seen.others == (silent, "no-such-host.invalid:9092")


@pytest.mark.parametrize(
    "server, address",
    [
        ("broker-1:9093", ("broker-1", 9093)),
        ("broker-1", ("broker-1", 9092)),
        ("[::1]:9094", ("::1", 9094)),
        ("::1", ("::1", 9092)),
    ],
)
def test_a_bootstrap_server_as_a_socket_address(server, address):
    assert host_and_port(server) == address
