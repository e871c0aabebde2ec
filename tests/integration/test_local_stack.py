"""The local stack is a real KRaft cluster with the shape the runbooks rely on."""

from __future__ import annotations

import re
from pathlib import Path

import requests

from kafka_runbooks_dev.localstack import jars
from kafka_runbooks_dev.localstack.stack import read_gauge
from tests.helpers import wait_until


def test_default_topology_has_four_racked_brokers_and_three_voters(local_stack, admin):
    brokers = admin.describe_brokers()
    assert sorted(brokers) == [1, 2, 3, 4]
    assert {b.rack for b in brokers.values()} == {"rack-a", "rack-b"}
    assert all(b.available for b in brokers.values())
    quorum = admin.describe_quorum()
    assert sorted(v.node_id for v in quorum.voters) == [9001, 9002, 9003]
    assert quorum.leader_id in {9001, 9002, 9003}
    assert sorted(o.node_id for o in quorum.observers) == [1, 2, 3, 4]


def test_cluster_settings_are_the_safe_ones(admin, kafka_config):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    client = AdminClient(kafka_config)
    res = ConfigResource(ResourceType.BROKER, "1")
    configs = client.describe_configs([res])[res].result(30)
    assert configs["min.insync.replicas"].value == "2"
    assert configs["unclean.leader.election.enable"].value == "false"
    assert configs["broker.rack"].value == "rack-a"


def test_every_node_exports_the_stable_metric_names(local_stack):
    for status in local_stack.status():
        if status.role == "connect":
            continue
        text = local_stack.metrics(status.name)
        assert text, f"{status.name} exporter did not answer"
        if status.role == "broker":
            assert read_gauge(text, "kafka_server_brokerstate") == 3
            assert read_gauge(text, "kafka_server_replicamanager_underreplicatedpartitions") is not None
            assert read_gauge(text, "kafka_server_broker_metadata_metrics_metadata_load_error_count") == 0
            assert read_gauge(text, "kafka_server_broker_metadata_metrics_metadata_apply_error_count") == 0
        else:
            assert read_gauge(text, "kafka_controller_kafkacontroller_metadataerrorcount") == 0
            assert read_gauge(text, "kafka_controller_kafkacontroller_activecontrollercount") in (0, 1)
    active = [
        s.name
        for s in local_stack.status()
        if s.role == "controller"
        and read_gauge(local_stack.metrics(s.name), "kafka_controller_kafkacontroller_activecontrollercount")
        == 1
    ]
    assert len(active) == 1


def test_every_kafka_node_maps_the_class_data_sharing_archive(local_stack):
    """The archive ensure_jars builds is really used: each JVM has it mapped (its /proc maps),
    not merely named on its command line (a JVM that rejects an archive starts without it)."""
    from kafka_runbooks_dev.localstack import cds
    from kafka_runbooks_dev.localstack.stack import kafka_classpath

    archive = cds.archive_path(local_stack.lib_dir, kafka_classpath(local_stack.lib_dir))
    assert archive.exists(), archive
    for status in local_stack.status():
        maps = Path(f"/proc/{status.pid}/maps").read_text()
        assert str(archive) in maps, f"{status.name} (pid {status.pid}) started without {archive.name}"


def test_every_node_runs_the_stacks_release_and_a_topic_takes_writes(local_stack, admin):
    """KR_KAFKA_VERSION reaches every node (each one's own start-up line says its version), and
    the cluster it formed creates a topic (RF 3) and takes acks=all writes."""
    from confluent_kafka import Producer

    from tests.helpers import create_topic, unique_topic

    for status in local_stack.status():
        said = set(re.findall(r"Kafka version: (\S+)", local_stack.log_file(status.name).read_text()))
        assert said == {local_stack.kafka_version}, f"{status.name} said {said}"
    topic = unique_topic("release-check")
    create_topic(local_stack.bootstrap_servers, topic, 3, 3)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(60) == 0, "records not delivered"
    assert sorted(
        len(p.replicas) for p in admin.read_state(include_log_dirs=False).partitions if p.topic == topic
    ) == [
        3,
        3,
        3,
    ]


def test_connect_worker_has_the_file_connectors(local_stack):
    lacking = jars.lacks(local_stack.lib_dir, jars.FILE_CONNECTORS)
    assert lacking is None, lacking.line()  # failed, and why: this release's jars were not served
    plugins = requests.get(f"{local_stack.connect_url}/connector-plugins", timeout=10).json()
    classes = {p["class"] for p in plugins}
    assert "org.apache.kafka.connect.file.FileStreamSinkConnector" in classes
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in classes


def test_kill_and_start_a_broker(restore_stack, admin):
    stack = restore_stack
    stack.kill(4)
    assert not stack.is_running(4)
    assert not stack.is_running("broker-4")
    wait_until(
        lambda: not admin.describe_brokers().get(4, None) or admin.describe_brokers()[4].fenced,
        30,
        what="broker 4 fenced or gone",
    )
    stack.start_node(4, wait=True)
    assert stack.is_running(4)
    assert stack.broker_state(4) == 3


def test_clean_stop_of_a_broker_moves_leadership_away(restore_stack, admin):
    stack = restore_stack
    stack.stop_node(2)
    assert not stack.is_running(2)
    state = admin.read_state(include_log_dirs=False)
    assert all(p.leader != 2 for p in state.partitions)


def test_quorum_survives_losing_one_controller(restore_stack, admin):
    stack = restore_stack
    leader = admin.describe_quorum().leader_id
    stack.kill(leader)
    quorum = wait_until(
        lambda: (q := admin.describe_quorum()).leader_id not in (leader, -1) and q,
        60,
        what="a new quorum leader",
    )
    assert quorum.leader_id in {9001, 9002, 9003} - {leader}
    # The cluster still accepts metadata changes without the old leader.
    from tests.helpers import create_topic, unique_topic

    create_topic(stack.bootstrap_servers, unique_topic("quorum-check"), 1, 3)
    stack.start_node(leader, wait=True)
