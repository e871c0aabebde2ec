"""Which nodes the local stack runs, and on which loopback ports.

The default is the smallest cluster the runbooks need: four brokers (a topic with
replication factor 3 can lose one broker and still be re-replicated elsewhere), three
dedicated KRaft controller voters (one can restart without losing the quorum), brokers
split over two racks, and one Kafka Connect worker.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

BROKER = "broker"
CONTROLLER = "controller"
CONNECT = "connect"

CONTROLLER_ID_BASE = 9000
CONNECT_NODE_ID = 0
LOOPBACK = "127.0.0.1"
SECURITY_MODES = ("none", "sasl_ssl")


@dataclass(frozen=True)
class Node:
    """One JVM of the stack."""

    node_id: int
    role: str
    port: int
    metrics_port: int
    rack: str | None = None

    @property
    def name(self) -> str:
        return CONNECT if self.role == CONNECT else f"{self.role}-{self.node_id}"

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"


@dataclass(frozen=True)
class Topology:
    """Shape of the local cluster; every port derives from ``port_base``."""

    brokers: int = 4
    controllers: int = 3
    racks: tuple[str, ...] = ("rack-a", "rack-b")
    connect: bool = True
    port_base: int = 19000
    broker_settings: dict[str, str] = field(default_factory=dict)
    # log directories per broker (JBOD): 1 keeps the default stack as it was; the first one
    # also holds the broker's metadata log, so a test fails one of the others
    log_dirs: int = 1
    # KIP-853 dynamic quorum: the controllers are formatted with ``--initial-controllers`` and
    # every node finds the quorum through ``controller.quorum.bootstrap.servers`` (False: the
    # static ``controller.quorum.voters`` of the default stack, unchanged)
    dynamic_quorum: bool = False
    # extra controllers of a dynamic quorum, formatted with ``--no-initial-controllers``: they
    # join as observers when started (``kstack start-node controller-9004``), never at stack start
    spare_controllers: int = 0
    # "sasl_ssl": every listener authenticated and the StandardAuthorizer on (``security.py``):
    # brokers on SASL_SSL (SCRAM-SHA-512) at their port and SSL (mTLS) 50 above, controllers on
    # mTLS, Connect's REST API behind basic auth; "none" (the default) is PLAINTEXT, no authorizer
    security: str = "none"

    def __post_init__(self) -> None:
        if self.security not in SECURITY_MODES:
            raise ValueError(f"security {self.security!r} is not one of {', '.join(SECURITY_MODES)}")
        if self.brokers < 1:
            raise ValueError("the stack needs at least one broker")
        if self.controllers < 1 or self.controllers % 2 == 0:
            raise ValueError("the KRaft quorum needs an odd number (>= 1) of controller voters")
        if self.spare_controllers and not self.dynamic_quorum:
            raise ValueError("spare controllers need a dynamic quorum (dynamic_quorum=True)")
        if self.controllers + self.spare_controllers > 9:
            raise ValueError("at most 9 controllers fit the stack's port layout")
        if self.log_dirs < 1:
            raise ValueError("a broker needs at least one log dir")
        if not self.racks:
            raise ValueError("give at least one rack name")
        if not 1024 <= self.port_base <= 65000 - 400:
            raise ValueError(f"port_base {self.port_base} leaves no room for the stack's ports")

    # Ports: brokers base+91.., controllers base+191.., Connect REST base+80;
    # every node's JMX exporter listens 200 above its main port.
    @property
    def broker_nodes(self) -> list[Node]:
        return [
            Node(
                node_id=i,
                role=BROKER,
                port=self.port_base + 90 + i,
                metrics_port=self.port_base + 290 + i,
                rack=self.racks[(i - 1) % len(self.racks)],
            )
            for i in range(1, self.brokers + 1)
        ]

    @property
    def controller_nodes(self) -> list[Node]:
        return [
            Node(
                node_id=CONTROLLER_ID_BASE + j,
                role=CONTROLLER,
                port=self.port_base + 190 + j,
                metrics_port=self.port_base + 390 + j,
            )
            for j in range(1, self.controllers + 1)
        ]

    @property
    def spare_controller_nodes(self) -> list[Node]:
        """Controllers that are not in the initial voter set: observers until added as voters."""
        return [
            Node(
                node_id=CONTROLLER_ID_BASE + j,
                role=CONTROLLER,
                port=self.port_base + 190 + j,
                metrics_port=self.port_base + 390 + j,
            )
            for j in range(self.controllers + 1, self.controllers + self.spare_controllers + 1)
        ]

    @property
    def connect_node(self) -> Node | None:
        if not self.connect:
            return None
        return Node(CONNECT_NODE_ID, CONNECT, self.port_base + 80, self.port_base + 280)

    @property
    def nodes(self) -> list[Node]:
        nodes = self.controller_nodes + self.spare_controller_nodes + self.broker_nodes
        if self.connect_node is not None:
            nodes.append(self.connect_node)
        return nodes

    @property
    def secured(self) -> bool:
        """Whether the stack authenticates every client and authorizes every request."""
        return self.security != "none"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.broker_nodes)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.address}" for n in self.controller_nodes)

    @property
    def quorum_bootstrap_servers(self) -> str:
        """A dynamic quorum's ``controller.quorum.bootstrap.servers``: the initial controllers."""
        return ",".join(n.address for n in self.controller_nodes)

    @property
    def connect_url(self) -> str | None:
        node = self.connect_node
        return f"http://{node.address}" if node else None

    def node(self, ref: str | int) -> Node:
        """Find a node by id (``3``, ``9001``) or name (``broker-3``, ``connect``)."""
        text = str(ref).strip()
        for node in self.nodes:
            if text in (node.name, str(node.node_id)) and not (
                node.role == CONNECT and text == str(CONNECT_NODE_ID)
            ):
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise KeyError(f"no node {text!r} in the local stack (known: {known})")

    def to_json(self) -> str:
        data = asdict(self)
        data["racks"] = list(self.racks)
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Topology:
        data = json.loads(text)
        data["racks"] = tuple(data.get("racks") or ("rack-a", "rack-b"))
        return cls(**data)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Topology:
        """Defaults, overridden by ``KR_STACK_BROKERS``, ``KR_STACK_CONTROLLERS``,
        ``KR_STACK_RACKS`` (comma separated), ``KR_STACK_CONNECT`` (0/1), ``KR_STACK_PORT_BASE``,
        ``KR_STACK_LOG_DIRS`` (per broker: 2 lets ``kstack fail-log-dir`` fail one),
        ``KR_STACK_DYNAMIC_QUORUM`` (0/1: KIP-853), ``KR_STACK_SPARE_CONTROLLERS`` (observers
        to add as voters; a dynamic quorum only) and ``KR_STACK_SECURITY`` (``sasl_ssl``: a
        secured stack, ``security.py``)."""
        env = os.environ if environ is None else environ
        kwargs: dict = {}
        if env.get("KR_STACK_BROKERS"):
            kwargs["brokers"] = int(env["KR_STACK_BROKERS"])
        if env.get("KR_STACK_CONTROLLERS"):
            kwargs["controllers"] = int(env["KR_STACK_CONTROLLERS"])
        if env.get("KR_STACK_RACKS"):
            kwargs["racks"] = tuple(r.strip() for r in env["KR_STACK_RACKS"].split(",") if r.strip())
        if env.get("KR_STACK_CONNECT"):
            kwargs["connect"] = env["KR_STACK_CONNECT"] not in ("0", "false", "no")
        if env.get("KR_STACK_PORT_BASE"):
            kwargs["port_base"] = int(env["KR_STACK_PORT_BASE"])
        if env.get("KR_STACK_LOG_DIRS"):
            kwargs["log_dirs"] = int(env["KR_STACK_LOG_DIRS"])
        if env.get("KR_STACK_DYNAMIC_QUORUM"):
            kwargs["dynamic_quorum"] = env["KR_STACK_DYNAMIC_QUORUM"] not in ("0", "false", "no")
        if env.get("KR_STACK_SPARE_CONTROLLERS"):
            kwargs["spare_controllers"] = int(env["KR_STACK_SPARE_CONTROLLERS"])
        if env.get("KR_STACK_SECURITY"):
            kwargs["security"] = env["KR_STACK_SECURITY"].strip().lower()
        return cls(**kwargs)
