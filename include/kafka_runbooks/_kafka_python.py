"""The RPCs confluent-kafka lacks, through kafka-python: private to the admin facade.

confluent-kafka (librdkafka) has no DescribeQuorum, DescribeLogDirs, partition
reassignments, nor DescribeTopicPartitions (leader epoch, ELR); kafka-python has them.
Everything kafka-python-specific (its config keywords, its result dicts, its internal
connection manager) stays in this module, and only :class:`kafka_runbooks.admin.ClusterAdmin`
calls it: the rest of the library sees the facade's methods and the dataclasses in
``kafka_runbooks.model``. The retry and fail-over rules are the facade's too: functions
here that talk to "the controller" take the facade's ``send(what, fn)``, which decides
whether and how a failed request is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka_runbooks.client_config import to_kafka_python
from kafka_runbooks.errors import AdminError
from kafka_runbooks.model import Broker, LogDir, LogDirReplica, PartitionState, Quorum, QuorumMember

log = logging.getLogger(__name__)


METADATA_TOPIC = "__cluster_metadata"


def kafka_uuid(value: Any) -> str | None:
    """A Uuid as Kafka writes it (base64url of its 16 bytes, no padding: meta.properties,
    kafka-metadata-quorum), from kafka-python's dashed form; None for none or the zero Uuid
    (a replica that sent no directory id)."""
    import base64
    import uuid

    if value is None:
        return None
    raw = uuid.UUID(str(value)).bytes
    if raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class KafkaPythonClient:
    """kafka-python's admin client, answering in the model's dataclasses.

    ``request_timeout_ms`` is one attempt's deadline (the facade keeps it a fraction of a
    call's): a broker that accepts connections but answers nothing (SIGSTOP, a long GC
    pause, a half-open connection) costs one attempt, not the call. Such a broker becomes
    a suspect (:attr:`suspects`, with the fact in words) and kafka-python's own node
    choice skips it for ``suspect_ms``, so the next attempt goes to another broker.
    """

    def __init__(
        self, config: dict[str, Any], request_timeout_ms: int = 30000, suspect_ms: int | None = None
    ) -> None:
        from kafka.admin import KafkaAdminClient

        kwargs = {
            "request_timeout_ms": request_timeout_ms,
            "bootstrap_timeout_ms": request_timeout_ms,
            **to_kafka_python(config),
        }
        kwargs.setdefault("client_id", "kafka-runbooks")
        self.request_timeout_ms = int(kwargs["request_timeout_ms"])
        self.suspect_ms = suspect_ms if suspect_ms is not None else 3 * self.request_timeout_ms
        #: broker id -> why it is skipped ("broker 2 accepted the connection but did not answer within 3 s")
        self.suspects: dict[int, str] = {}
        #: broker id -> when (monotonic s) it last refused a connection: no controller-bound request
        #: goes there for ``suspect_ms`` (kafka-python's own back-off ends within milliseconds)
        self.refused: dict[int, float] = {}
        self._client = KafkaAdminClient(**kwargs)
        _watch_nodes(self)

    def close(self) -> None:
        """Close kafka-python's admin client and its broker connections."""
        self._client.close()

    def forget_controller(self) -> None:
        """Drop the broker kafka-python cached as "the controller" (under KRaft any broker
        from metadata); the next controller request asks the metadata for a live one."""
        self._client._controller_id = None

    def suspect(self, node_id: int, fact: str) -> None:
        """Skip ``node_id`` for ``suspect_ms``: kafka-python's reconnect back-off is what its
        least-loaded node choice and its sends by node id already honour (a send to it fails
        at once with NodeNotReadyError); a cached controller on it is forgotten."""
        import time

        manager = self._client._manager
        failures, _, connect_ms = manager._backoff.get(node_id, (0, 0, manager.config["request_timeout_ms"]))
        manager._backoff[node_id] = (failures + 1, time.monotonic() + self.suspect_ms / 1000, connect_ms)
        if self._client._controller_id == node_id:
            self.forget_controller()
        if node_id not in self.suspects:
            log.warning("%s; skipping it for %.0f s", fact, self.suspect_ms / 1000)
        self.suspects[node_id] = fact

    def answered(self, node_id: int) -> None:
        """A node that answers is no longer a suspect."""
        self.refused.pop(node_id, None)
        if self.suspects.pop(node_id, None) is not None:
            log.info("broker %s answers again", node_id)

    def advertised_api_versions(self, api_key: int) -> tuple[int, int] | None:
        """(min, max) versions of ``api_key`` the connected broker advertised, None if absent."""
        data = self._client._manager.broker_version_data
        versions = getattr(data, "api_versions", None) or {}
        return versions.get(api_key)

    def describe_features(
        self,
    ) -> tuple[dict[str, int], dict[str, tuple[int, int]], dict[int, tuple[int, int]]]:
        """ApiVersions v3+: (finalized feature -> max level, supported feature -> range, api key -> range)."""
        answer = self._client.describe_features()
        finalized = {name: f["finalized"][1] for name, f in answer.items() if "finalized" in f}
        supported = {name: tuple(f["supported"]) for name, f in answer.items() if "supported" in f}
        data = self._client._manager.broker_version_data
        apis = {int(k): tuple(v) for k, v in (getattr(data, "api_versions", None) or {}).items()}
        return finalized, supported, apis

    def describe_cluster(self) -> tuple[str, list[Broker]]:
        """Registered brokers, fenced ones included (DescribeCluster v2, KIP-1073)."""
        data = self._client.describe_cluster()
        brokers = [
            Broker(
                broker_id=b["broker_id"],
                host=b.get("host"),
                port=b.get("port"),
                rack=b.get("rack"),
                alive=True,
                # no field: a pre-v2 answer (or the Metadata fallback), which lists only unfenced
                # brokers (KRaft's alive brokers), so a listed broker without it is unfenced
                fenced=bool(b.get("is_fenced", False)),
            )
            for b in data["brokers"]
        ]
        return data["cluster_id"], brokers

    def cluster_authorized_operations(self) -> frozenset[str] | None:
        """The operations the principal may do on the cluster (DescribeCluster's KIP-430 field; a
        principal without DESCRIBE on the cluster is told none), None when the broker did not say."""
        return _operations(_authorized(self._client.describe_cluster(), "cluster_authorized_operations"))

    def topic_authorized_operations(self, topics: list[str] | None) -> dict[str, frozenset[str] | None]:
        """Per topic (all it may see when None) the operations the principal may do on it, None when
        the authorizer refused it DESCRIBE; a topic that does not exist is left out (Metadata)."""
        out: dict[str, frozenset[str] | None] = {}
        for topic in self._client.describe_topics(topics):
            code = topic.get("error_code", 0)
            if code == TOPIC_AUTHORIZATION_FAILED:
                out[topic["name"]] = None
            elif code == 0:
                out[topic["name"]] = (
                    _operations(_authorized(topic, "topic_authorized_operations")) or frozenset()
                )
        return out

    def topic_names(self) -> list[str]:
        """Every topic the metadata names, internal ones included (a Metadata request)."""
        return list(self._client.list_topics())

    def describe_quorum(self) -> Quorum:
        """DescribeQuorum (KRaft): the metadata quorum's leader, voters and observers; AdminError when the
        partition reports an error. Timestamps are the leader's clock (-1 from Kafka becomes None)."""
        data = self._client.describe_metadata_quorum()
        part = data["topics"][0]["partitions"][0]
        if part.get("error"):
            raise AdminError(f"DescribeQuorum failed: {part['error']}")

        def members(rows: list[dict]) -> tuple[QuorumMember, ...]:
            """Voters or observers as QuorumMembers (a missing timestamp or directory id stays None)."""
            return tuple(
                QuorumMember(
                    node_id=r["replica_id"],
                    log_end_offset=r["log_end_offset"],
                    last_caught_up_ms=_ts(r.get("last_caught_up_timestamp")),
                    last_fetch_ms=_ts(r.get("last_fetch_timestamp")),
                    directory_id=kafka_uuid(r.get("replica_directory_id")),
                )
                for r in rows
            )

        return Quorum(
            leader_id=part["leader_id"],
            leader_epoch=part["leader_epoch"],
            high_watermark=part["high_watermark"],
            voters=members(part["current_voters"]),
            observers=members(part["observers"]),
            hosts={
                n["node_id"]: n["listeners"][0]["host"] for n in data.get("nodes") or () if n.get("listeners")
            },
        )

    def describe_partitions(self, topics: list[str], page_size: int = 2000) -> list[PartitionState]:
        """Leader, leader epoch, replicas, ISR and ELR of every partition of ``topics``."""
        out: list[PartitionState] = []
        if not topics:
            return out
        cursor = None
        while True:
            data = self._client.describe_topic_partitions(
                topics, response_partition_limit=page_size, cursor=cursor
            )
            for topic in data["topics"]:
                if topic["error_code"] == TOPIC_AUTHORIZATION_FAILED:  # never read as "deleted"
                    _refused(topic["error_code"], f"TOPIC {topic['name']}")
                if topic["error_code"] != 0:
                    # UNKNOWN_TOPIC_OR_PARTITION: deleted since it was listed.
                    log.info("topic %s not described (error code %s)", topic["name"], topic["error_code"])
                    continue
                for p in topic["partitions"]:
                    out.append(
                        PartitionState(
                            topic=topic["name"],
                            partition=p["partition_index"],
                            leader=p["leader_id"],
                            leader_epoch=p["leader_epoch"],
                            replicas=tuple(p["replica_nodes"] or ()),
                            isr=tuple(p["isr_nodes"] or ()),
                            elr=tuple(p.get("eligible_leader_replicas") or ()),
                            last_known_elr=tuple(p.get("last_known_elr") or ()),
                            offline_replicas=tuple(p.get("offline_replicas") or ()),
                        )
                    )
            cursor = data.get("next_cursor")
            if not cursor:
                return out

    def topic_configs(self, topics: list[str], names: list[str]) -> dict[str, dict[str, str]]:
        """Effective values of config ``names`` per topic (sent to any live broker).

        confluent-kafka sends DescribeConfigs to "the controller", which under KRaft is
        a random broker id from metadata; once that broker dies every call times out.
        A topic missing from the answer could not be described (kafka-python drops the
        per-resource error code).
        """
        from kafka.admin import ConfigResource, ConfigResourceType

        resources = [ConfigResource(ConfigResourceType.TOPIC, t, configs=list(names)) for t in topics]
        data = describe_configs(self, resources).get("topic", {})
        return {
            topic: {k: v.get("value") for k, v in entries.items()}
            for topic, entries in data.items()
            if entries
        }

    def describe_log_dirs(self, broker_id: int) -> list[LogDirReplica]:
        """Replica sizes in every healthy log dir of one broker (asked of that broker)."""
        return [r for d in self.describe_log_dir_states(broker_id) for r in d.replicas]

    def describe_log_dir_states(self, broker_id: int, replicas: bool = True) -> tuple[LogDir, ...]:
        """Every log dir of one broker (asked of that broker), failed ones with their error code;
        ``replicas=False`` asks for no topic (an empty list, not null): the dirs alone, cheap enough
        for a page load."""
        from kafka.protocol.admin import DescribeLogDirsRequest

        from kafka_runbooks.log_dirs import parse_describe_log_dirs

        manager = self._client._manager

        async def ask():
            """The request for every dir of the broker, on kafka-python's event loop."""
            return await manager.send(
                DescribeLogDirsRequest(topics=None if replicas else []), node_id=broker_id
            )

        # sent here, not by kafka-python's describe_log_dirs, which drops the answer's error code:
        # a principal without DESCRIBE on the cluster got "no log dirs", not a refusal
        response = manager.run(ask)
        _refused(getattr(response, "error_code", 0), f"BROKER {broker_id}")
        dirs = parse_describe_log_dirs(broker_id, [result.to_dict() for result in response.results])
        for d in dirs:
            if not d.online:
                log.warning("broker %s log dir %s: error %s", broker_id, d.path, d.error_code)
        return dirs


TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31


def _refused(code: int, resource: str) -> None:
    """Raise kafka-python's authorization error for an answer's TOPIC_ or CLUSTER_AUTHORIZATION_FAILED
    code, naming the resource (the facade maps it to NotAuthorized); any other code: nothing."""
    if code in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED):
        from kafka import errors

        raise errors.for_code(code)(resource)


def describe_configs(
    client: KafkaPythonClient, resources: list, asked_of: int | None = None
) -> dict[str, dict[str, dict]]:
    """DescribeConfigs as kafka-python's ``describe_configs(config_filter="all")`` answers it (broker
    resources asked of their broker), but a resource the authorizer refused raises (kafka-python
    drops per-resource error codes: a refused topic read as one without configs). Other resources
    are asked of ``asked_of`` where given, else of the least loaded broker."""
    kp = client._client
    broker_resources, other_resources = kp._group_config_resources(resources)

    async def ask():
        """Every request, on kafka-python's event loop."""
        answers = []
        for broker_id, group in broker_resources.items():
            answers.append(await kp._manager.send(kp._describe_configs_request(group), node_id=broker_id))
        if other_resources:
            request = kp._describe_configs_request(other_resources)
            answers.append(await kp._manager.send(request, node_id=asked_of))
        return answers

    responses = kp._manager.run(ask)
    for response in responses:
        for result in response.results:
            kind = {2: "TOPIC", 4: "BROKER"}.get(result.resource_type, str(result.resource_type))
            _refused(result.error_code, f"{kind} {result.resource_name}")
    return kp._describe_configs_process_responses(responses, "all")


def _authorized(answer: dict[str, Any], wire_name: str) -> Any:
    """The KIP-430 field of a DescribeCluster or Metadata answer: kafka-python 3.0.12 gives it as
    ``authorized_operations`` (names, decoded); the wire's own name (a bit field) where a client
    passes the field through. Read on a real authorizing broker: the wire name alone was never there,
    so every ACL read as missing."""
    value = answer.get("authorized_operations")
    return value if value is not None else answer.get(wire_name)


def _operations(value: Any) -> frozenset[str] | None:
    """KIP-430 authorized operations as AclOperation names: a bit field from the wire (bit n set =
    operation n), or kafka-python's list of names; None for none given (Kafka's INT32_MIN: not asked)."""
    from kafka.admin import ACLOperation

    if value is None or value == -(2**31):
        return None
    if isinstance(value, int):
        known = {op.value: op.name for op in ACLOperation}
        return frozenset(known[bit] for bit in range(32) if value & (1 << bit) and bit in known)
    return frozenset(str(getattr(op, "name", op)) for op in value)


def _ts(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


def _watch_nodes(client: KafkaPythonClient) -> None:
    """Route every request of kafka-python through one watched send (internal API, wrapped
    here only): the node each request goes to is known, a node that lets a request time
    out becomes a suspect, and a controller-bound request is never routed to a suspect.

    The admin methods of kafka-python call ``manager.send`` (least-loaded node or a node
    id) and ``_refresh_controller_id`` (under KRaft: any broker named by the metadata);
    both are replaced on this client's instances only.
    """
    manager = client._client._manager
    send = manager.send
    refresh_controller_id = client._client._refresh_controller_id

    def watched_send(request, node_id=None, request_timeout_ms=None):
        """kafka-python's send, remembering which node answered and making one that timed out a suspect."""
        node = node_id if node_id is not None else manager.least_loaded_node()
        try:
            future = send(request, node_id=node, request_timeout_ms=request_timeout_ms)
        except Exception as exc:  # a connection refused at once: remembered, then kafka-python's
            if node is not None:
                _on_send_failure(client, node, exc, request_timeout_ms)
            raise
        if node is not None:
            future.add_callback(lambda _: client.answered(node))
            future.add_errback(lambda exc: _on_send_failure(client, node, exc, request_timeout_ms))
        return future

    async def controller_id_not_suspect(timeout_ms=30000):
        """The node for controller-bound requests: kafka-python's choice unless it is a suspect or refused
        its last connection, then the lowest other broker the metadata names (:func:`controller_choice`)."""
        import time

        node = await refresh_controller_id(timeout_ms)
        recent = time.monotonic() - client.suspect_ms / 1000
        refused = {b for b, at in client.refused.items() if at >= recent}
        # a refused connection (a broker killed a moment ago, still in the metadata): kafka-python's
        # back-off forgets it within milliseconds, and a retry went back to it (seen: ElectLeaders
        # after a kill -9, every attempt to the dead broker)
        avoid = set(client.suspects) | set(manager._backoff) | refused
        chosen = controller_choice(node, [b.node_id for b in manager.cluster.brokers()], avoid)
        if chosen != node:
            log.info(
                "controller requests go to broker %s, not to broker %s (suspect or refused)", chosen, node
            )
        return chosen

    manager.send = watched_send
    client._client._refresh_controller_id = controller_id_not_suspect


def controller_choice(node: int | None, brokers: list[int], avoid: set[int]) -> int | None:
    """The broker controller-bound requests go to: the one kafka-python named, unless it is a
    suspect or its last connection failed (a broker killed a moment ago stays in the metadata,
    unfenced, for its session timeout: a retry that picked it again failed again, and the
    restore of an unclean recovery ran out of attempts under load); then the lowest other one. A
    node the metadata no longer names is never chosen while it names others: kafka-python's cached
    id of a broker killed a moment ago failed every retry with ``UnknownBrokerIdError`` (seen in a
    clean-clone run's unclean scenario)."""
    if node is None or (node not in avoid and (node in brokers or not brokers)):
        return node
    others = sorted(b for b in brokers if b not in avoid)
    return others[0] if others else node


def _on_send_failure(
    client: KafkaPythonClient, node: int, exc: BaseException, timeout_ms: int | None
) -> None:
    """A request that timed out on ``node`` (the connection was accepted, or is half-open,
    and nothing came back) makes the node a suspect; a refused connection or a node already
    in back-off is kafka-python's own business (it backs off by itself)."""
    import time

    from kafka.errors import KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError

    if isinstance(exc, KafkaConnectionError):
        client.refused[node] = time.monotonic()
        if client._client._controller_id == node:  # kafka-python re-sends to a cached controller
            client.forget_controller()  # without asking again: every ElectLeaders retry went there
        return
    if not isinstance(exc, (RequestTimedOutError, KafkaTimeoutError)):
        return
    seconds = (timeout_ms or client.request_timeout_ms) / 1000
    if isinstance(exc, RequestTimedOutError):
        fact = f"broker {node} accepted the connection but did not answer within {seconds:g} s"
    elif "connection timed out" in str(exc).lower():
        fact = f"broker {node} did not accept a connection in time ({exc})"
    else:
        fact = f"broker {node} did not answer in time ({exc})"
    client.suspect(node, fact)


def node_answers(client: KafkaPythonClient, node_id: int, timeout_ms: int) -> None:
    """Send a Metadata request for no topic to ``node_id`` itself and wait for its answer; raise
    what kafka-python raised when it did not answer (refused, timed out, not in the metadata).

    A KRaft broker opens its listeners only once its controller has unfenced its registration,
    so an answer comes from a registered, serving process: unlike DescribeCluster, which may
    still show the registration of a process that crashed (unfenced until its session times out)."""
    from kafka.protocol.metadata import MetadataRequest

    manager = client._client._manager

    async def ask():
        """The request, on kafka-python's event loop; the node's address refreshed first if unknown."""
        if manager.cluster.broker_metadata(node_id) is None:  # a broker back since the last refresh
            await manager.cluster.refresh_metadata()
        return await manager.send(MetadataRequest(topics=[]), node_id=node_id, request_timeout_ms=timeout_ms)

    manager.run(ask)


# ---------------------------------------------------------------------------------
# Unclean recovery (issue 4): a replica's own log end offset, asked of its broker, and
# the two controller RPCs that reach a chosen leader today (reorder, then UNCLEAN).
# ---------------------------------------------------------------------------------

DEBUGGING_REPLICA_ID = -2  # ListOffsets answered from the local log, leader or not
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # ListOffsets v7+: the record with the largest timestamp, with its batch's epoch
MAX_PARTITIONS_PER_REQUEST = 1000  # AlterPartitionReassignments / ElectLeaders chunks
ELECT_LEADERS_API_KEY = 43
ELECTION_TYPE_UNCLEAN = 1
ELECTION_TYPE_PREFERRED = 0


Send = Callable[[str, Callable[[], Any]], Any]


def _once(what: str, fn: Callable[[], Any]) -> Any:
    """The default ``send``: one attempt, the caller handles a failure."""
    return fn()


def list_replica_log_ends(
    client: KafkaPythonClient,
    by_broker: dict[int, list[tuple[str, int]]],
    timeout_ms: int,
    batch: int | None = None,
) -> tuple[dict[int, list[tuple[str, int, int, int, int | None]] | Exception], int]:
    """Ask each broker for the log end offset and the newest written epoch of its own replicas.

    Two ListOffsets(replica_id=-2) per broker, all in flight at once: LATEST gives the
    replica's log end offset (its epoch field is the partition's *current* epoch from
    metadata, useless here), MAX_TIMESTAMP gives the epoch of the batch holding the
    replica's newest record by timestamp, read from its own log. A partition may appear
    only once per request (the broker answers INVALID_REQUEST to duplicates), hence two.
    ListOffsets has no partition cap: ``batch`` (None = all in one) only exists to
    measure. OffsetsForLeaderEpoch would give the exact last epoch, but brokers answer
    it only as the partition's leader (NOT_LEADER_OR_FOLLOWER on an offline partition).

    Returns, per broker, rows ``(topic, partition, error_code, log_end_offset, epoch)``
    (epoch None when the log has no record to read it from) or the exception that
    broker's requests failed with; plus the number of requests sent.
    """
    planned = _plan_log_end_requests(by_broker, batch)
    answers = _send_all(client._client._manager, by_broker, planned, timeout_ms)
    return _merge_log_ends(by_broker, answers), len(planned)


def _plan_log_end_requests(
    by_broker: dict[int, list[tuple[str, int]]], batch: int | None
) -> list[tuple[int, int, object]]:
    """``(broker, timestamp, request)``: per broker and chunk of ``batch`` partitions, one LATEST
    and one MAX_TIMESTAMP request, each naming a partition once (a duplicate is INVALID_REQUEST)."""
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    part_cls = topic_cls.ListOffsetsPartition
    planned: list[tuple[int, int, object]] = []
    for broker_id, partitions in by_broker.items():
        size = batch or max(1, len(partitions))
        for i in range(0, len(partitions), size):
            per_topic: dict[str, list[int]] = {}
            for topic, partition in partitions[i : i + size]:
                per_topic.setdefault(topic, []).append(partition)
            for timestamp in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
                request = ListOffsetsRequest(
                    replica_id=DEBUGGING_REPLICA_ID,
                    isolation_level=0,
                    topics=[
                        topic_cls(
                            name=topic,
                            partitions=[
                                part_cls(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                                for p in parts
                            ],
                        )
                        for topic, parts in per_topic.items()
                    ],
                )
                planned.append((broker_id, timestamp, request))
    return planned


def _send_all(
    manager,
    by_broker: dict[int, list[tuple[str, int]]],
    planned: list[tuple[int, int, object]],
    timeout_ms: int,
) -> list[tuple[int, int, object]]:
    """Send every planned request at once, each to its broker; ``(broker, timestamp, answer or exception)``.

    A request that cannot be sent or answered is that broker's failure, never the others'.
    """

    async def send_all():
        # kafka-python only connects to brokers its cached metadata knows; a broker that
        # came back since the last refresh is "unknown" until the cache is refreshed.
        """Send every planned request on kafka-python's event loop and gather each broker's answer or
        error."""
        if any(manager.cluster.broker_metadata(b) is None for b in by_broker):
            try:
                await manager.cluster.refresh_metadata()
            except Exception as exc:  # the sends below report per broker
                log.info("metadata refresh before ListOffsets failed: %s", exc)
        futures = []
        for broker_id, timestamp, request in planned:
            try:
                futures.append(
                    (
                        broker_id,
                        timestamp,
                        manager.send(request, node_id=broker_id, request_timeout_ms=timeout_ms),
                    )
                )
            except Exception as exc:  # unknown broker id, no connection: this broker's answer is the error
                futures.append((broker_id, timestamp, exc))
        answers: list[tuple[int, int, object]] = []
        for broker_id, timestamp, future in futures:
            if isinstance(future, Exception):
                answers.append((broker_id, timestamp, future))
                continue
            try:
                answers.append((broker_id, timestamp, await future))
            except Exception as exc:
                answers.append((broker_id, timestamp, exc))
        return answers

    return manager.run(send_all)


def _merge_log_ends(
    by_broker: dict[int, list[tuple[str, int]]], answers: list[tuple[int, int, object]]
) -> dict[int, list[tuple[str, int, int, int, int | None]] | Exception]:
    """Per broker, one row per partition from its two answers; or its first failure.

    The epoch is None unless MAX_TIMESTAMP found a record (no error, an offset >= 0, an epoch
    >= 0): an empty log or an old broker says nothing about the epoch, never epoch -1.
    """
    ends: dict[int, dict[tuple[str, int], tuple[int, int]]] = {}
    epochs: dict[int, dict[tuple[str, int], int | None]] = {}
    failed: dict[int, Exception] = {}
    for broker_id, timestamp, answer in answers:
        if isinstance(answer, Exception):
            failed.setdefault(broker_id, answer)
            continue
        for topic in answer.topics:
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if timestamp == LATEST_TIMESTAMP:
                    ends.setdefault(broker_id, {})[key] = (p.error_code, p.offset)
                else:
                    epoch = getattr(p, "leader_epoch", -1)
                    ok = p.error_code == 0 and p.offset is not None and p.offset >= 0 and epoch >= 0
                    epochs.setdefault(broker_id, {})[key] = epoch if ok else None
    out: dict[int, list[tuple[str, int, int, int, int | None]] | Exception] = {}
    for broker_id in by_broker:
        if broker_id in failed:
            out[broker_id] = failed[broker_id]
            continue
        out[broker_id] = [
            (topic, partition, code, offset, epochs.get(broker_id, {}).get((topic, partition)))
            for (topic, partition), (code, offset) in ends.get(broker_id, {}).items()
        ]
    return out


def reorder_replicas(
    client: KafkaPythonClient, orders: dict[tuple[str, int], list[int]], send: Send = _once
) -> dict[tuple[str, int], str | None]:
    """AlterPartitionReassignments with the same replica sets in a new order.

    Returns per partition None (accepted) or the error's name. Each request goes
    through ``send`` (the facade fails it over to a live broker).
    """
    from kafka.structs import TopicPartition

    out: dict[tuple[str, int], str | None] = {}
    items = list(orders.items())
    for i in range(0, len(items), MAX_PARTITIONS_PER_REQUEST):
        chunk = {TopicPartition(t, p): list(r) for (t, p), r in items[i : i + MAX_PARTITIONS_PER_REQUEST]}
        answer = send(
            "AlterPartitionReassignments",
            lambda chunk=chunk: client._client.alter_partition_reassignments(chunk),
        )
        for tp, err in answer.items():
            out[(tp.topic, tp.partition)] = None if err is None else err.__name__
        for (t, p), _ in items[i : i + MAX_PARTITIONS_PER_REQUEST]:
            out.setdefault((t, p), "NoAnswer")
    return out


def elect_unclean(
    client: KafkaPythonClient, partitions: list[tuple[str, int]], send: Send = _once
) -> dict[tuple[str, int], str | None]:
    """ElectLeaders(UNCLEAN); per partition None (elected or not needed) or the error.

    Each request goes through ``send`` (the facade fails it over to a live broker).
    """
    return _elect(client, ELECTION_TYPE_UNCLEAN, partitions, send)


def elect_preferred(
    client: KafkaPythonClient, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], str | None]:
    """ElectLeaders(PREFERRED); per partition None (elected), the error's name otherwise
    (``ElectionNotNeededError`` when the preferred replica already leads)."""
    return _elect(client, ELECTION_TYPE_PREFERRED, partitions, _once)


def _elect(
    client: KafkaPythonClient, election_type: int, partitions: list[tuple[str, int]], send: Send
) -> dict[tuple[str, int], str | None]:
    """ElectLeaders in requests of at most MAX_PARTITIONS_PER_REQUEST partitions; a partition
    the answer does not name gets the request's top-level error, or "NoAnswer"."""
    out: dict[tuple[str, int], str | None] = {}
    for i in range(0, len(partitions), MAX_PARTITIONS_PER_REQUEST):
        per_topic: dict[str, list[int]] = {}
        for topic, partition in partitions[i : i + MAX_PARTITIONS_PER_REQUEST]:
            per_topic.setdefault(topic, []).append(partition)
        response = send(
            "ElectLeaders",
            lambda per_topic=per_topic: client._client.elect_leaders(
                election_type, per_topic, raise_errors=False
            ),
        )
        top = getattr(response, "error_code", 0)
        for result in response.replica_election_results:
            for p in result.partition_result:
                code = p.error_code or top
                out[(result.topic, p.partition_id)] = (
                    None if code == 0 else _error_name(code, p.error_message)
                )
        for topic, parts in per_topic.items():
            for partition in parts:
                out.setdefault((topic, partition), _error_name(top, None) if top else "NoAnswer")
    return out


def _error_name(code: int, message: str | None) -> str:
    from kafka import errors

    name = errors.for_code(code).__name__
    return f"{name}: {message}" if message else name


# ---------------------------------------------------------------------------------
# Failed-broker reassignment (issue 5): submit and list partition reassignments, and
# the incremental config changes that set and remove replication throttles.
# ---------------------------------------------------------------------------------


def alter_reassignments(
    client: KafkaPythonClient, targets: dict[tuple[str, int], list[int] | None], send: Send = _once
) -> dict[tuple[str, int], str | None]:
    """AlterPartitionReassignments: per partition None (accepted) or the error's name.

    A target of None cancels the partition's reassignment.
    """
    from kafka.structs import TopicPartition

    out: dict[tuple[str, int], str | None] = {}
    items = list(targets.items())
    for i in range(0, len(items), MAX_PARTITIONS_PER_REQUEST):
        part = items[i : i + MAX_PARTITIONS_PER_REQUEST]
        request = {TopicPartition(t, p): (None if r is None else list(r)) for (t, p), r in part}
        answer = send(
            "AlterPartitionReassignments",
            lambda request=request: client._client.alter_partition_reassignments(request),
        )
        for tp, err in answer.items():
            out[(tp.topic, tp.partition)] = None if err is None else err.__name__
        for key, _ in part:
            out.setdefault(key, "NoAnswer")
    return out


def list_reassignments(
    client: KafkaPythonClient, send: Send = _once
) -> dict[tuple[str, int], dict[str, list[int]]]:
    """Every reassignment in flight: replicas (target + removing), adding, removing."""
    answer = send("ListPartitionReassignments", lambda: client._client.list_partition_reassignments())
    return {
        (tp.topic, tp.partition): {
            "replicas": list(v["replicas"]),
            "adding": list(v["adding_replicas"]),
            "removing": list(v["removing_replicas"]),
        }
        for tp, v in answer.items()
    }


def describe_config_values(
    client: KafkaPythonClient, resource_type: str, names: list[str], keys: list[str], asked_of=None
) -> dict[str, dict[str, str | None]]:
    """Values of ``keys`` set on each resource (``resource_type`` "broker" or "topic").

    Only values set on the resource itself count (dynamic per-broker or per-topic
    configs); defaults and static settings read as absent. Broker resources are asked of
    the broker itself.
    """
    from kafka.admin import ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.BROKER if resource_type == "broker" else ConfigResourceType.TOPIC
    if resource_type == "broker":
        _know_brokers(client, [int(n) for n in names])
    own = "DYNAMIC_BROKER_CONFIG" if resource_type == "broker" else "DYNAMIC_TOPIC_CONFIG"
    resources = [ConfigResource(rtype, str(n), configs=list(keys)) for n in names]
    if asked_of is not None:
        _know_brokers(client, [int(asked_of)])
    data = describe_configs(client, resources, asked_of).get(resource_type, {})
    out: dict[str, dict[str, str | None]] = {}
    for name in names:
        entries = data.get(str(name), {})
        out[str(name)] = {
            k: entries[k].get("value")
            for k in keys
            if k in entries and entries[k].get("config_source") == own
        }
    return out


def effective_broker_configs(
    client: KafkaPythonClient, broker_id: int, keys: list[str]
) -> dict[str, str | None]:
    """The effective values of ``keys`` on one broker (static, dynamic or default alike), asked of
    that broker; a key it does not report is absent."""
    from kafka.admin import ConfigResource, ConfigResourceType

    _know_brokers(client, [broker_id])
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), configs=list(keys))
    data = describe_configs(client, [resource]).get("broker", {})
    entries = data.get(str(broker_id), {})
    return {k: entries[k].get("value") for k in keys if k in entries}


def incremental_alter_configs(
    client: KafkaPythonClient, resource_type: str, changes: dict[str, dict[str, tuple[str, str | None]]]
) -> dict[str, str]:
    """IncrementalAlterConfigs: ``changes`` = {resource name: {key: (op, value)}}.

    op is SET, DELETE, APPEND or SUBTRACT (APPEND/SUBTRACT edit list configs item by
    item, so other tools' entries survive). Returns per resource "OK" or the error.
    """
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.BROKER if resource_type == "broker" else ConfigResourceType.TOPIC
    if resource_type == "broker":
        _know_brokers(client, [int(n) for n in changes if changes[n]])
    resources = [
        ConfigResource(
            rtype, str(name), configs={k: (AlterConfigOp[op], v) for k, (op, v) in entries.items()}
        )
        for name, entries in changes.items()
        if entries
    ]
    if not resources:
        return {}
    answer = client._client.alter_configs(resources, raise_on_unknown=False, incremental=True)
    results = answer.get(resource_type, {})
    return {str(name): results.get(str(name), "NoAnswer") for name in changes if changes[name]}


def _know_brokers(client: KafkaPythonClient, broker_ids: list[int]) -> None:
    """Refresh kafka-python's broker cache when it lacks one of ``broker_ids``: a broker back
    since the last refresh is "unknown" to requests sent to it by id."""
    import time

    manager = client._client._manager

    async def refresh():
        """Refresh kafka-python's cluster metadata (on its event loop)."""
        await manager.cluster.refresh_metadata()

    for attempt in range(5):  # the broker answering may not have the newcomer in its cache yet
        if all(manager.cluster.broker_metadata(b) is not None for b in broker_ids):
            return
        if attempt:
            time.sleep(1)
        try:
            manager.run(refresh)
        except Exception as exc:  # the request that follows reports the broker's own error
            log.info("metadata refresh failed: %s", exc)


def _consumer(config: dict[str, Any], timeout_ms: int):
    """A KafkaConsumer of no group that commits nothing (partitions assigned, read from offsets given);
    iteration stops after ``timeout_ms`` without a record."""
    from kafka import KafkaConsumer

    kwargs = {k: v for k, v in to_kafka_python(config).items() if k in KafkaConsumer.DEFAULT_CONFIG}
    return KafkaConsumer(
        **kwargs,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=timeout_ms,
        request_timeout_ms=max(timeout_ms + 1000, 5000),
    )


def end_offsets(config: dict[str, Any], topic: str, timeout_ms: int) -> dict[int, int]:
    """The topic's end offset per partition (ListOffsets, latest); LookupError when it has none."""
    from kafka import TopicPartition

    consumer = _consumer(config, timeout_ms)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not parts:
            raise LookupError(f"the topic {topic!r} has no partitions the client can see")
        return {tp.partition: offset for tp, offset in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


def values_since(
    config: dict[str, Any], topic: str, since: dict[int, int], keys: set[str], timeout_ms: int
) -> dict[str, list[bytes | None]]:
    """The values written under ``keys`` (UTF-8 record keys) after ``since`` (offset per partition),
    up to each partition's end when asked, oldest first; None for a tombstone."""
    from kafka import TopicPartition

    written: dict[str, list[bytes | None]] = {k: [] for k in keys}
    consumer = _consumer(config, timeout_ms)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in since])
        pending = {tp for tp, end in ends.items() if end > since[tp.partition]}
        if not pending:
            return written
        consumer.assign(sorted(pending, key=lambda tp: tp.partition))
        for tp in pending:
            consumer.seek(tp, since[tp.partition])
        for record in consumer:  # ends after timeout_ms without a record
            key = record.key.decode(errors="replace") if isinstance(record.key, bytes) else record.key
            if key in written:
                written[key].append(record.value)
            if record.offset + 1 >= ends[TopicPartition(record.topic, record.partition)]:
                pending.discard(TopicPartition(record.topic, record.partition))
            if not pending:
                break
        return written
    finally:
        consumer.close()
