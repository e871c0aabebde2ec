import pytest

from kafka_runbooks_dev.localstack.topology import Topology


def test_default_topology_is_four_brokers_over_two_racks_and_three_voters():
    topo = Topology()
    assert [n.node_id for n in topo.broker_nodes] == [1, 2, 3, 4]
    assert [n.rack for n in topo.broker_nodes] == ["rack-a", "rack-b", "rack-a", "rack-b"]
    assert topo.quorum_voters == "9001@127.0.0.1:19191,9002@127.0.0.1:19192,9003@127.0.0.1:19193"
    assert topo.bootstrap_servers.split(",")[0] == "127.0.0.1:19091"
    assert topo.connect_url == "http://127.0.0.1:19080"


def test_every_port_is_distinct():
    topo = Topology(brokers=9, controllers=5)
    ports = [p for n in topo.nodes for p in (n.port, n.metrics_port)]
    assert len(ports) == len(set(ports))


@pytest.mark.parametrize(
    "ref,name",
    [(3, "broker-3"), ("broker-3", "broker-3"), ("9002", "controller-9002"), ("connect", "connect")],
)
def test_nodes_are_found_by_id_or_name(ref, name):
    assert Topology().node(ref).name == name


def test_unknown_node_names_the_known_ones():
    with pytest.raises(KeyError, match="broker-1"):
        Topology().node(7)
    with pytest.raises(KeyError):
        Topology().node(0)  # the Connect worker has no Kafka node id


@pytest.mark.parametrize("kwargs", [{"brokers": 0}, {"controllers": 2}, {"racks": ()}, {"port_base": 80}])
def test_impossible_topologies_are_refused(kwargs):
    with pytest.raises(ValueError):
        Topology(**kwargs)


def test_topology_round_trips_and_reads_the_environment():
    topo = Topology.from_env(
        {"KR_STACK_BROKERS": "5", "KR_STACK_RACKS": "r1, r2,r3", "KR_STACK_CONNECT": "0"}
    )
    assert (topo.brokers, topo.racks, topo.connect) == (5, ("r1", "r2", "r3"), False)
    assert Topology.from_json(topo.to_json()) == topo
    assert topo.connect_node is None


def test_new_cluster_ids_never_start_with_a_dash(monkeypatch):
    """kafka-storage's argument parser reads '-abc...' as an option (1 start in 64 failed)."""
    import uuid

    from kafka_runbooks_dev.localstack import kraft_format

    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # urlsafe base64 of 0xfb... starts with '-'
    fresh = iter([dash_first, uuid.UUID(int=1)])
    monkeypatch.setattr(kraft_format.uuid, "uuid4", lambda: next(fresh))
    assert kraft_format.base64.urlsafe_b64encode(dash_first.bytes).decode().startswith("-")
    assert not kraft_format.new_kafka_uuid().startswith("-")
