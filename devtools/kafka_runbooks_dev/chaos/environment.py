"""The campaign's own stack, Spark Connect server and Airflow, on a port base of its own.

``KR_CHAOS_PORT_BASE`` (default 17000: the stack 17000-17400, Spark Connect +2 to +4, Airflow
+500 to +502) and ``KR_CHAOS_HOME`` (default ``.stack/chaos``) keep it apart from ``make demo``
(19000) and ``make test`` (28000-31500). Airflow runs with the settings the end-to-end tests use
(:func:`~kafka_runbooks_dev.localstack.airflow_settings.runbook_test_settings`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from kafka_runbooks_dev.localstack.airflow_settings import runbook_test_settings
from kafka_runbooks_dev.localstack.stack import PROJECT_ROOT, LocalStack
from kafka_runbooks_dev.localstack.topology import Topology

AIRFLOW_OFFSET = 500


def topology(name: str, base: int) -> Topology:
    """The campaign's stacks: ``default`` (4 brokers in 2 racks, 3 controllers, Connect) for most
    runbooks; ``jbod`` (4 brokers with two log dirs, a dynamic quorum of 3 with a spare controller)
    for the log-dir failure and the controller replacement, as the end-to-end tests build it."""
    if name == "jbod":
        # 4 brokers: with 3, the RF-3 internal topics (consumer offsets) have no broker to move a
        # failed dir's replicas to, and every log-dir plan after the first is (rightly) impossible
        return Topology(
            brokers=4,
            controllers=3,
            racks=("rack-a",),
            connect=False,
            port_base=base,
            log_dirs=2,
            dynamic_quorum=True,
            spare_controllers=1,
        )
    return Topology(port_base=base)


@dataclass
class Environment:
    """The started stack and Airflow, and where the runbooks keep their data."""

    stack: LocalStack
    airflow: AirflowLocal
    data_dir: Path

    def fresh_stack(self) -> None:
        """A new stack of the same topology on the same ports (Airflow's connections stay true)."""
        from kafka_runbooks_dev import spark_connect

        spark_connect.stop_recorded(self.stack.home)
        self.stack.stop()
        self.stack.destroy()
        self.stack.start(timeout=900)
        self.stack.start_spark_connect(store_url=str(PROJECT_ROOT))

    def stop(self) -> None:
        """Airflow killed (thrown away), then the stack and its Spark Connect server stopped."""
        from kafka_runbooks_dev import spark_connect

        self.airflow.stop(timeout=0)
        spark_connect.stop_recorded(self.stack.home)
        self.stack.stop()


def start(name: str = "default", home: Path | None = None, port_base: int | None = None) -> Environment:
    """A fresh stack of topology ``name`` (:func:`topology`, destroyed first), its Spark Connect
    server and a fresh Airflow on them."""
    home = Path(home or os.environ.get("KR_CHAOS_HOME") or PROJECT_ROOT / ".stack" / "chaos").resolve()
    base = int(port_base or os.environ.get("KR_CHAOS_PORT_BASE", "17000"))
    stack = LocalStack(home=home / "stack", topology=topology(name, base))
    stack.destroy()
    stack.start(timeout=900)
    stack.start_spark_connect(store_url=str(PROJECT_ROOT))
    data_dir = home / "data"
    # a new cluster gets a new data store: run states of an earlier campaign's cluster (same connection
    # id, another cluster) were found and acted on by a stop (stop seed 9, round 2)
    shutil.rmtree(data_dir, ignore_errors=True)
    os.environ["KAFKA_RUNBOOKS_DATA_DIR"] = str(data_dir)  # the campaign reads the runbooks' state files too
    airflow = AirflowLocal(
        home / "airflow",
        port=base + AIRFLOW_OFFSET,
        dags_folders=[PROJECT_ROOT / "dags"],
        plugins_folder=PROJECT_ROOT / "plugins",
        connections=stack.airflow_connections(spark_master="local[2]"),
        extra_env=runbook_test_settings(data_dir),
    )
    airflow.stop()
    shutil.rmtree(airflow.home, ignore_errors=True)
    airflow.start(timeout=600)
    # the controller replacement runs Kafka's own kafka-metadata-quorum from the stack's jars
    airflow.api("POST", "/variables", json={"key": "kafka_runbooks_kafka_libs", "value": str(stack.lib_dir)})
    return Environment(stack, airflow, data_dir)
