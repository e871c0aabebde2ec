"""Formatting a local stack node's KRaft storage (``kafka-storage format``), and the release a
stack was formatted with.

A stack's ``stack.json`` records the Kafka release it was formatted with (``kafka_version``):
a KRaft log formatted by one release carries that release's metadata version, which an older
release cannot read, so a formatted stack is never started with another release.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_runbooks_dev.localstack import security
from kafka_runbooks_dev.localstack.jars import ENV, FORMATTED_BEFORE_RECORDS, STACK_ASSETS, StackError
from kafka_runbooks_dev.localstack.topology import CONNECT, CONTROLLER, Node

if TYPE_CHECKING:  # the stack imports this module: a type only, no import at run time
    from kafka_runbooks_dev.localstack.stack import LocalStack


def new_kafka_uuid() -> str:
    """A random Kafka Uuid (16 bytes, base64url: a cluster id, a directory id); never one starting
    with '-' (the storage tool would read it as an option)."""
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not value.startswith("-"):
            return value


def formatted(stack: LocalStack) -> bool:
    """Whether any KRaft node of the stack has formatted storage."""
    return any(
        (stack.node_dir(n) / "data" / "meta.properties").exists()
        for n in stack.topology.nodes
        if n.role != CONNECT
    )


def record_release(stack: LocalStack, state: dict) -> None:
    """Put the stack's release in ``state`` (stack.json), refusing a formatted stack of another
    release. A stack formatted before the record was kept ran ``FORMATTED_BEFORE_RECORDS``."""
    had = state.get("kafka_version", FORMATTED_BEFORE_RECORDS)
    if had != stack.kafka_version and formatted(stack):
        raise StackError(
            f"the stack in {stack.home} was formatted with Kafka {had}; {ENV} asks for "
            f"{stack.kafka_version}: a KRaft log formatted by one release may not start on another "
            f"(an older one cannot read its metadata). Start it with {ENV}={had}, or "
            f"`kstack destroy` it (its data goes) and start it anew"
        )
    state["kafka_version"] = stack.kafka_version


def format_storage(stack: LocalStack, node: Node, config: Path) -> None:
    """Format a node's storage once (its ``meta.properties`` says it is), as the stack's release
    formats it: the cluster id, the node's config and the quorum's options."""
    data = stack.node_dir(node) / "data"
    if (data / "meta.properties").exists():
        return
    proc = subprocess.run(
        [
            "java",
            "-cp",
            stack._classpath(node),
            f"-Dkr.log.file={stack.node_dir(node) / 'format.log'}",
            f"-Dlog4j2.configurationFile={STACK_ASSETS / 'log4j2.properties'}",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            stack.cluster_id,
            "-c",
            str(config),
            "--ignore-formatted",
            *quorum_format_args(stack, node),
            *security.format_args(stack, node),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise StackError(
            f"formatting {node.name}'s storage (Kafka {stack.kafka_version}) failed:\n{proc.stdout}{proc.stderr}"
        )


def directory_id(stack: LocalStack, node: Node) -> str:
    """The metadata log directory id of an initial controller of a dynamic quorum: chosen
    once per stack (kept in stack.json) and given to ``--initial-controllers`` on every one."""
    state = stack._state()
    ids = state.setdefault("directory_ids", {})
    if str(node.node_id) not in ids:
        ids[str(node.node_id)] = new_kafka_uuid()
        (stack.home / "stack.json").write_text(json.dumps(state, indent=2))
    return ids[str(node.node_id)]


def quorum_format_args(stack: LocalStack, node: Node) -> list[str]:
    """kafka-storage format's quorum options: none for a static quorum; the initial voters
    (``id@host:port:directory-id``) for the initial controllers of a dynamic one, and
    ``--no-initial-controllers`` for a spare controller, which then starts as an observer."""
    topo = stack.topology
    if not topo.dynamic_quorum or node.role != CONTROLLER:
        return []
    if node in topo.spare_controller_nodes:
        return ["--no-initial-controllers"]
    voters = ",".join(f"{n.node_id}@{n.address}:{directory_id(stack, n)}" for n in topo.controller_nodes)
    return ["--initial-controllers", voters]
