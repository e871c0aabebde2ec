"""The RPCs confluent-kafka lacks, through kafka-python, kept in this one module.

confluent-kafka (librdkafka) has no DescribeQuorum, DescribeLogDirs, partition
reassignments, nor DescribeTopicPartitions (leader epoch, ELR); kafka-python has them.
Everything kafka-python-specific (its config keywords, its result dicts, its internal
connection manager) stays behind this class, so the rest of the library sees only the
dataclasses in ``kafka_runbooks.model``.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks.client_config import to_kafka_python
from kafka_runbooks.model import Broker, LogDirReplica, PartitionState, Quorum, QuorumMember

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"


class KafkaPythonGaps:
    def __init__(self, config: dict[str, Any], request_timeout_ms: int = 30000) -> None:
        from kafka.admin import KafkaAdminClient

        kwargs = {"request_timeout_ms": request_timeout_ms, **to_kafka_python(config)}
        kwargs.setdefault("client_id", "kafka-runbooks")
        self._client = KafkaAdminClient(**kwargs)

    def close(self) -> None:
        self._client.close()

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
                fenced=bool(b.get("is_fenced", False)),
            )
            for b in data["brokers"]
        ]
        return data["cluster_id"], brokers

    def describe_quorum(self) -> Quorum:
        data = self._client.describe_metadata_quorum()
        part = data["topics"][0]["partitions"][0]
        if part.get("error"):
            raise RuntimeError(f"DescribeQuorum failed: {part['error']}")

        def members(rows: list[dict]) -> tuple[QuorumMember, ...]:
            return tuple(
                QuorumMember(
                    node_id=r["replica_id"],
                    log_end_offset=r["log_end_offset"],
                    last_caught_up_ms=_ts(r.get("last_caught_up_timestamp")),
                    last_fetch_ms=_ts(r.get("last_fetch_timestamp")),
                )
                for r in rows
            )

        return Quorum(
            leader_id=part["leader_id"],
            leader_epoch=part["leader_epoch"],
            high_watermark=part["high_watermark"],
            voters=members(part["current_voters"]),
            observers=members(part["observers"]),
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
        data = self._client.describe_configs(resources, config_filter="all").get("topic", {})
        return {
            topic: {k: v.get("value") for k, v in entries.items()}
            for topic, entries in data.items()
            if entries
        }

    def describe_log_dirs(self, broker_id: int) -> list[LogDirReplica]:
        """Replica sizes in every log dir of one broker (asked of that broker)."""
        out: list[LogDirReplica] = []
        for answer in self._client.describe_log_dirs(brokers=[broker_id]):
            for d in answer["log_dirs"]:
                if d["error_code"] != 0:
                    log.warning("broker %s log dir %s: error %s", broker_id, d["log_dir"], d["error_code"])
                    continue
                for t in d["topics"]:
                    for p in t["partitions"]:
                        out.append(
                            LogDirReplica(
                                broker_id=broker_id,
                                topic=t["name"],
                                partition=p["partition_index"],
                                size_bytes=p["partition_size"],
                                log_dir=d["log_dir"],
                                offset_lag=p.get("offset_lag", 0),
                                is_future=bool(p.get("is_future_key", False)),
                            )
                        )
        return out


def _ts(value: int | None) -> int | None:
    return None if value is None or value < 0 else value
