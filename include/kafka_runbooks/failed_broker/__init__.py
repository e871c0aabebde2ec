"""Replica movement: failure tracking, planning, throttled chunked execution, the stop.

The DAGs below all move replicas with the chunked executor; one list of them, so that a stop
request, the Kafka page's progress and Stop link, and the sweeps' "one reassignment per
cluster at a time" all reach every one of them (a DAG missing from one of three copies of this
list was a rebalance the sweep could start a heal beside)."""

REASSIGNING_DAG_IDS = (
    "kafka_failed_broker_reassignment",
    "kafka_broker_decommission",
    "kafka_log_dir_failure",
    "kafka_rebalance",
)
