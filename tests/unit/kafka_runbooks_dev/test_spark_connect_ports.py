"""The stack's Spark Connect server opens three ports, all from the stack's port base: gRPC (+2),
the driver's RPC (+3) and the block manager (+4). Spark binds the last two to ephemeral ports
unless told, so they did not move with ``KR_STACK_PORT_BASE`` and were in no port list. Checked on
the command the stack starts the server with (``server_command`` with the stack's settings, what
``start_spark_connect`` passes through ``start_recorded``), without starting a JVM."""

from __future__ import annotations

import pytest

from kafka_runbooks_dev import spark_connect
from kafka_runbooks_dev.localstack.s3proxy import PORT_OFFSET as S3PROXY_OFFSET
from kafka_runbooks_dev.localstack.stack import LocalStack
from kafka_runbooks_dev.localstack.topology import Topology


def _confs(argv: list[str]) -> dict[str, str]:
    """The ``--conf key=value`` pairs of a spark-submit command line."""
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


@pytest.mark.parametrize("base", [19000, 23000])
def test_the_connect_servers_command_pins_its_driver_and_block_manager_ports_from_the_base(
    tmp_path, monkeypatch, base
):
    monkeypatch.delenv(spark_connect.PORT_ENV, raising=False)
    stack = LocalStack(home=tmp_path / "stack", topology=Topology(port_base=base))
    argv, _ = spark_connect.server_command(
        stack.spark_connect_port, store_url=str(tmp_path), conf=stack.spark_connect_conf
    )
    confs = _confs(argv)
    assert confs["spark.connect.grpc.binding.port"] == str(base + 2)
    assert confs["spark.driver.port"] == str(base + 3)
    assert confs["spark.blockManager.port"] == str(base + 4)
    assert confs["spark.port.maxRetries"] == "0"  # a taken port fails the start, never an unlisted one
    assert argv[argv.index("--class") + 1] == spark_connect.SERVER_CLASS


def test_no_two_of_the_stacks_ports_are_the_same(tmp_path, monkeypatch):
    """The pinned ports sit in the stack's gap between Spark Connect (+2) and S3Proxy (+70)."""
    monkeypatch.delenv(spark_connect.PORT_ENV, raising=False)
    topology = Topology(port_base=19000, dynamic_quorum=True, spare_controllers=1)
    stack = LocalStack(home=tmp_path / "stack", topology=topology)
    nodes = [*topology.broker_nodes, *topology.controller_nodes, *topology.spare_controller_nodes]
    nodes += [topology.connect_node]
    ports = [p for n in nodes for p in (n.port, n.metrics_port)]
    ports += [stack.spark_connect_port, 19000 + S3PROXY_OFFSET]
    ports += [int(stack.spark_connect_conf[k]) for k in ("spark.driver.port", "spark.blockManager.port")]
    assert len(ports) == len(set(ports)), sorted(ports)
