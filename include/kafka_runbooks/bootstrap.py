"""Which bootstrap servers refuse connections: a cluster that nothing listens for fails fast.

A refused TCP connection is the host's own answer that no process listens on that port: no
broker there, not a slow one. kafka-python cannot tell it from a broker that is slow to
answer: it backs off and connects again until its bootstrap deadline, and the facade then
tried each server alone with a deadline of its own, so a stopped two-broker cluster cost
three deadlines (30 s of a sweep's task) before it was called unreachable.

Here a refusal is known at once. Only a server that accepted the connection, or whose
connect did not finish (a filtered port, a DNS failure: unknown, never "dead"), is worth a
bootstrap attempt. When every server refuses, they are asked again until one deadline
has passed (a broker being restarted starts listening again), and then the cluster is
reported as not listening. A slow live cluster accepts connections, so it is never
misread as dead by this rule: its reads keep their own deadlines.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

KAFKA_PORT = 9092  # a bootstrap server named without a port: Kafka's default, as the clients assume


@dataclass(frozen=True)
class BootstrapProbe:
    """One look at every bootstrap server: those that refused a connection and the others."""

    refused: tuple[str, ...]
    #: accepted a connection, or did not finish connecting (unknown): worth a bootstrap attempt
    others: tuple[str, ...]


def bootstrap_servers(servers: str) -> list[str]:
    """The ``host:port`` entries of a ``bootstrap.servers`` value, in its order."""
    return [s.strip() for s in str(servers).split(",") if s.strip()]


def host_and_port(server: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too; no port: Kafka's 9092) as a socket address."""
    host, sep, port = server.rpartition(":")
    if not sep or host.endswith(":") or (":" in host and not host.startswith("[")):
        return server.strip("[]"), KAFKA_PORT  # no port, or a bare IPv6 address
    return host.strip("[]"), int(port)


def refuses(server: str, connect_timeout_s: float) -> bool:
    """True only when the connection was refused (on every address the name resolves to).

    A connection that is accepted is closed at once, before a byte is sent. A timeout, a
    route or DNS failure is not a refusal: nothing is known about the broker then.
    """
    try:
        with socket.create_connection(host_and_port(server), timeout=connect_timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


def probe(servers: list[str], connect_timeout_s: float = 1.0) -> BootstrapProbe:
    """Ask each bootstrap server once whether anything listens."""
    refused = tuple(s for s in servers if refuses(s, connect_timeout_s))
    return BootstrapProbe(refused=refused, others=tuple(s for s in servers if s not in refused))


def until_one_listens(
    servers: list[str],
    deadline_s: float,
    *,
    step_s: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> BootstrapProbe:
    """Probe the servers until one does not refuse, or ``deadline_s`` has passed since the first
    probe; the last probe is returned (``others`` empty: every server refused for the deadline)."""
    started = clock()
    while True:
        seen = probe(servers, connect_timeout_s=min(1.0, deadline_s))
        if seen.others or clock() - started + step_s > deadline_s:
            return seen
        sleep(step_s)
