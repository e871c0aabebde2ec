"""Metadata-error sweep: metric names, comparison with the last sweep, state file, DAG shape.

Expositions here are in the JMX exporter's wire format as seen on Kafka 4.3.1 nodes; the
integration tests read the real nodes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_runbooks.metadata_errors.discovery import BROKER, CONTROLLER, NodeRef
from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints, NodeReading
from kafka_runbooks.metadata_errors.metrics import parse
from kafka_runbooks.metadata_errors.state import MetadataErrorStateStore, NodeState
from kafka_runbooks.metadata_errors.sweep import (
    FLAGGED,
    HEALTHY,
    NOT_RUNNING,
    UNKNOWN,
    SweepOptions,
    _counter_text,
    assess,
)

ROOT = Path(__file__).resolve().parents[4]

BROKER_TEXT = """\
# HELP kafka_server_broker_metadata_metrics_metadata_apply_error_count Broker metadata loader/publisher metrics
# TYPE kafka_server_broker_metadata_metrics_metadata_apply_error_count gauge
kafka_server_broker_metadata_metrics_metadata_apply_error_count {apply}
# TYPE kafka_server_broker_metadata_metrics_metadata_load_error_count gauge
kafka_server_broker_metadata_metrics_metadata_load_error_count {load}
# TYPE kafka_server_brokerstate gauge
kafka_server_brokerstate {state}
# TYPE kafka_server_raft_metrics_current_leader gauge
kafka_server_raft_metrics_current_leader 9001.0
# TYPE kafka_server_raft_metrics_election_latency_avg gauge
kafka_server_raft_metrics_election_latency_avg NaN
# TYPE process_start_time_seconds gauge
process_start_time_seconds {start}
"""

CONTROLLER_TEXT = """\
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount {active}
# TYPE kafka_controller_kafkacontroller_metadataerrorcount gauge
kafka_controller_kafkacontroller_metadataerrorcount {errors}
"""


APPLY_NAME = "kafka_server_broker_metadata_metrics_metadata_apply_error_count"


def broker_text(load=0, apply=0, state=3, start=1.795315621672e9) -> str:
    return BROKER_TEXT.format(load=f"{load}.0", apply=f"{apply}.0", state=f"{state}.0", start=start)


def reading(node_id: int, text: str | None, error: str | None = None) -> NodeReading:
    return NodeReading(node_id, f"http://n{node_id}/metrics", parse(text) if text else None, error)


# -- names ---------------------------------------------------------------------------


def test_shipped_names_are_read():
    m = parse(broker_text(load=2, apply=5))
    assert m.counters == {"metadata_load_errors": 2.0, "metadata_apply_errors": 5.0}
    assert (
        m.names["metadata_apply_errors"] == "kafka_server_broker_metadata_metrics_metadata_apply_error_count"
    )
    assert (m.broker_state, m.raft_leader, m.process_start_s) == (3, 9001, 1.795315621672e9)
    c = parse(CONTROLLER_TEXT.format(active="1.0", errors="4.0"))
    assert c.counters == {"controller_metadata_errors": 4.0} and c.active_controller_count == 1
    assert c.looks_like_controller and not c.looks_like_broker


def test_the_proposals_names_are_the_same_counters():
    text = (
        "# TYPE kafka_server_broker_metadata_metrics_publisher_error_count gauge\n"
        "kafka_server_broker_metadata_metrics_publisher_error_count 3.0\n"
        "# TYPE kafka_server_broker_metadata_metrics_listener_batch_load_error_count gauge\n"
        "kafka_server_broker_metadata_metrics_listener_batch_load_error_count 1.0\n"
        "# TYPE kafka_controller_kafkacontroller_forcerenouncecount counter\n"
        "kafka_controller_kafkacontroller_forcerenouncecount_total 7.0\n"
    )
    m = parse(text)
    assert m.counters == {
        "metadata_load_errors": 1.0,
        "metadata_apply_errors": 3.0,
        "controller_metadata_errors": 7.0,
    }
    assert m.names["controller_metadata_errors"] == "kafka_controller_kafkacontroller_forcerenouncecount"


def test_the_exporters_default_naming_is_normalised():
    # no rules: <domain>_<type>_<attribute>{name="..."}
    text = (
        "# TYPE kafka_controller_KafkaController_Value untyped\n"
        'kafka_controller_KafkaController_Value{name="MetadataErrorCount",} 2.0\n'
        'kafka_controller_KafkaController_Value{name="ActiveControllerCount",} 1.0\n'
        "# TYPE kafka_server_KafkaServer_Value untyped\n"
        'kafka_server_KafkaServer_Value{name="BrokerState",} 3.0\n'
        "# TYPE kafka_server_broker_metadata_metrics_metadata_load_error_count untyped\n"
        "kafka_server_broker_metadata_metrics_metadata_load_error_count 0.0\n"
    )
    m = parse(text)
    assert m.counters["controller_metadata_errors"] == 2.0
    assert m.active_controller_count == 1 and m.broker_state == 3
    assert m.counters["metadata_load_errors"] == 0.0


def test_not_an_exposition_is_an_error():
    with pytest.raises(ValueError):
        parse("<html><body>502 Bad Gateway</body></html>\n{not metrics}")


# -- endpoint configuration ------------------------------------------------------------


def test_endpoints_explicit_url_wins_over_template():
    ep = MetricsEndpoints.from_config(
        {
            "kind": "prometheus",
            "endpoints": {"2": "http://special:1/metrics"},
            "url_template": "http://{host}:9404/metrics",
            "controller_url_template": "http://kafka-{node_id}.controllers:9404/metrics",
        }
    )
    assert ep.url(2, host="b2") == "http://special:1/metrics"
    assert ep.url(3, host="b3") == "http://b3:9404/metrics"
    assert ep.url(9001, controller=True, host="c1") == "http://kafka-9001.controllers:9404/metrics"
    assert ep.configured_ids == [2]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"kind": "strimzi-agent", "url_template": "https://x/v1/broker-state"}, "Prometheus endpoints"),
        ({"kind": "prometheus"}, "no metrics endpoints configured"),
        ({"url_template": "http://{pod}:9404/metrics"}, "bad URL template"),
        ({"url_template": "http://{host}:9404/metrics", "timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_endpoint_config_is_refused_before_any_call(extra, message):
    with pytest.raises(ValueError, match=message):
        MetricsEndpoints.from_config(extra)


def test_a_node_without_url_reads_as_unknown_without_a_call():
    ep = MetricsEndpoints(url_template="http://{host}:9404/metrics")
    r = ep.read(7, host=None)
    assert not r.ok and "needs {host}" in r.error


# -- comparison with the last sweep ----------------------------------------------------


def broker(node_id=2) -> NodeRef:
    return NodeRef(node_id, {BROKER})


def test_first_seen_is_based_not_flagged_and_then_an_increase_flags():
    row, state = assess(broker(), reading(2, broker_text(load=3)), None, 1000)
    assert (row["status"], row["change"]) == (HEALTHY, "first seen")
    assert sorted(row["based"]) == ["metadata_apply_errors", "metadata_load_errors"]
    assert state.counters == {"metadata_load_errors": 3.0, "metadata_apply_errors": 0.0}
    row, state = assess(broker(), reading(2, broker_text(load=3, apply=2)), state, 2000)
    assert row["status"] == FLAGGED and row["increased"] == {"metadata_apply_errors": [0.0, 2.0]}
    assert state.increase_streak == 1 and state.seen_at_ms == 2000


def test_a_restarted_node_without_new_errors_is_rebased_not_flagged():
    prev = NodeState(
        counters={"metadata_load_errors": 4.0, "metadata_apply_errors": 1.0}, process_start_s=1.0
    )
    row, state = assess(broker(), reading(2, broker_text(load=0, apply=0, start=5000.0)), prev, 3000)
    assert row["status"] == HEALTHY and row["change"] == "re-based (restarted, no error since)"
    assert row["rebased"] == {"metadata_load_errors": [4.0, 0.0], "metadata_apply_errors": [1.0, 0.0]}
    assert row["increased"] == {} and row["restarted_since_last_sweep"] is True
    assert state.counters["metadata_load_errors"] == 0.0 and state.increase_streak == 0
    assert state.process_start_s == 5000.0


@pytest.mark.parametrize("after", [1, 3, 5])
def test_errors_after_a_restart_count_from_zero_even_below_the_old_value(after):
    # 3 errors, the process restarts (its start time moves), then `after` new errors: every
    # one of them is new, whether below, at or above the old counter
    prev = NodeState(
        counters={"metadata_load_errors": 0.0, "metadata_apply_errors": 3.0}, process_start_s=1000.0
    )
    row, state = assess(broker(), reading(2, broker_text(apply=after, start=2000.5)), prev, 3000)
    assert row["restarted_since_last_sweep"] is True
    assert row["status"] == FLAGGED and row["change"] == "increased since its restart (counted from zero)"
    assert row["increased"] == {"metadata_apply_errors": [0.0, float(after)]}
    assert state.counters["metadata_apply_errors"] == after and state.increase_streak == 1
    assert _counter_text(row).endswith(f"0 -> {after} ({APPLY_NAME}) since its restart")


def test_a_lower_counter_without_a_restart_seen_is_only_rebased():
    # no process start time in either reading: a drop cannot tell the errors since the restart
    prev = NodeState(counters={"metadata_load_errors": 0.0, "metadata_apply_errors": 3.0})
    text = broker_text(apply=1).replace("process_start_time_seconds", "other_start_seconds")
    row, _ = assess(broker(), reading(2, text), prev, 3000)
    assert row["restarted_since_last_sweep"] is None
    assert row["status"] == HEALTHY and row["rebased"] == {"metadata_apply_errors": [3.0, 1.0]}
    # the same process (start time unchanged) with a lower value: also re-based, never an increase
    prev = NodeState(
        counters={"metadata_load_errors": 0.0, "metadata_apply_errors": 3.0}, process_start_s=7.0
    )
    row, _ = assess(broker(), reading(2, broker_text(apply=1, start=7.0)), prev, 3000)
    assert row["restarted_since_last_sweep"] is False and row["status"] == HEALTHY


def test_unreadable_is_unknown_and_keeps_the_last_values():
    prev = NodeState(counters={"metadata_load_errors": 1.0, "metadata_apply_errors": 0.0}, increase_streak=1)
    row, state = assess(broker(), reading(2, None, "ConnectionError: refused"), prev, 4000)
    assert row["status"] == UNKNOWN and row["error"] == "ConnectionError: refused"
    assert state is prev


def test_an_exposition_without_the_counters_for_the_role_is_unknown():
    controller = NodeRef(9001, {CONTROLLER})
    row, _ = assess(controller, reading(9001, broker_text()), None, 1)
    assert row["status"] == UNKNOWN and "controller_metadata_errors" in row["error"]


def test_a_broker_not_running_is_never_healthy():
    row, _ = assess(broker(), reading(2, broker_text(state=1)), None, 1)
    assert row["status"] == NOT_RUNNING and row["broker_state_name"] == "STARTING"


def test_a_configured_node_gets_its_role_from_its_metrics():
    ref = NodeRef(9002)
    row, _ = assess(ref, reading(9002, CONTROLLER_TEXT.format(active="0.0", errors="0.0")), None, 1)
    assert row["roles"] == [CONTROLLER] and row["status"] == HEALTHY


def test_options_refuse_nonsense():
    with pytest.raises(ValueError, match="controller_escalate_after"):
        SweepOptions(controller_escalate_after=0)
    with pytest.raises(ValueError, match="max_flagged_brokers"):
        SweepOptions(max_flagged_brokers=-1)


# -- state file ------------------------------------------------------------------------


def test_state_survives_a_new_store_and_a_corrupt_file_is_named(tmp_path):
    store = MetadataErrorStateStore("kafka_default", tmp_path)
    with store.locked():
        store.save(
            {3: NodeState(counters={"metadata_load_errors": 2.0}, increase_streak=1, restart_run_id="r1")}
        )
    again = MetadataErrorStateStore("kafka_default", tmp_path).load()
    assert again[3].counters == {"metadata_load_errors": 2.0} and again[3].restart_run_id == "r1"
    assert json.loads(store.path.read_text())["nodes"]["3"]["increase_streak"] == 1
    store.path.write_text("{oops")
    with pytest.raises(ValueError, match="not valid JSON"):
        store.load()


# -- DAG shape -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_metadata_error_sweep.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["kafka_metadata_error_sweep"]


def test_the_sweep_only_starts_runbooks_and_asks_before_the_controller(sweep_dag):
    from airflow.providers.standard.operators.hitl import HITLBranchOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

    gate = sweep_dag.get_task("cluster.controller_decision")
    assert isinstance(gate, HITLBranchOperator)
    # no default answer: nobody answering within the hour fails the gate and starts nothing
    assert gate.defaults is None and gate.response_timeout.total_seconds() == 3600
    assert gate.approve_option == "Restart it (last)"
    assert gate.options_mapping == {
        "Restart it (last)": "cluster.restart_active_controller",
        "Leave it": "cluster.leave_active_controller",
    }
    restart = sweep_dag.get_task("cluster.restart_active_controller")
    assert isinstance(restart, TriggerDagRunOperator) and restart.trigger_dag_id == "kafka_broker_restart"
    # starts only on a recorded "Restart it" of its own cluster's gate
    assert restart.gate_task_id == "cluster.controller_decision"
    assert gate.task_id in restart.upstream_task_ids
    assert restart.conf["require_approval"] is True
    # every template reads this cluster's escalation (its own map index), never every cluster's
    for rendered in (restart.trigger_run_id, *[v for v in restart.conf.values() if isinstance(v, str)]):
        assert "map_indexes=ti.map_index" in rendered and "'cluster.sweep'" in rendered
    mapped = sweep_dag.get_task("start_broker_restarts")
    assert mapped.partial_kwargs["trigger_dag_id"] == "kafka_broker_restart"
    assert mapped.upstream_task_ids == {"broker_restart_requests"}
    sweep = sweep_dag.get_task("cluster.sweep")
    assert sweep_dag.max_active_runs == 2 and sweep.max_active_tis_per_dag == 1
    assert [o.name for o in sweep.outlets] == ["kafka_metadata_error_report"]


def test_one_mapped_group_per_cluster_and_broker_restarts_wait_only_for_the_sweeps(sweep_dag):
    """Before: one cluster per run (its kafka_config_id param). Now every cluster of the fleet,
    each in its own instance of the mapped ``cluster`` group."""
    group = sweep_dag.task_group_dict["cluster"]
    assert type(group).__name__ == "MappedTaskGroup"
    assert {t.task_id for t in group.iter_tasks()} == {
        "cluster.sweep",
        "cluster.raise_alerts",
        "cluster.controller_decision",
        "cluster.restart_active_controller",
        "cluster.leave_active_controller",
    }
    assert [op.task_id for op, _ in group._expand_input.iter_references()] == ["clusters"]
    assert sweep_dag.get_task("clusters").retries == 0
    assert "kafka_config_ids" in sweep_dag.params and "kafka_config_id" not in sweep_dag.params
    assert sweep_dag.params["kafka_config_ids"] is None  # null = the deployment's setting
    assert sweep_dag.params["metrics_conn_id"] is None and sweep_dag.params["restart_conn_id"] is None
    outside = {t for t in sweep_dag.task_ids if not t.startswith("cluster.")}
    assert outside == {"clusters", "broker_restart_requests", "start_broker_restarts"}
    collect = sweep_dag.get_task("broker_restart_requests")
    # a failed cluster's sweep does not hold the others' restarts, and a gate waiting an hour
    # in one cluster does not either (only the sweeps are upstream)
    assert collect.trigger_rule == "all_done"
    assert collect.upstream_task_ids == {"clusters", "cluster.sweep"}
    # the gate asks by itself only when its cluster escalated: no branch in front of it
    assert sweep_dag.get_task("cluster.controller_decision").upstream_task_ids == {"cluster.sweep"}
    assert sweep_dag.get_task("cluster.raise_alerts").upstream_task_ids == {"cluster.sweep"}
