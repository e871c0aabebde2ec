"""DataStoreSparkSubmitOperator's decisions, without spark-submit: what it hands the provider.

spark-submit itself (the provider's ``SparkSubmitOperator.execute``) is stood in for by a
recorder of the operator's arguments at that moment; the real submissions, local and over
``s3a://`` against S3Proxy, are in tests/spark/ (test_jobs_on_s3a.py submits the plan through
this operator). Checked:
on a local store nothing changes; on an ``s3://`` store the store's URLs become ``s3a://``,
its Spark settings and ``KAFKA_RUNBOOKS_SPARK_JARS`` are added (the task's own conf wins),
and the store connection's keys reach a local driver's environment, never its command line,
and no YARN or Kubernetes Spark at all.
"""

from __future__ import annotations

import json

import pendulum
import pytest
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from kafka_runbooks import storage
from kafka_runbooks_airflow.operators.spark import DataStoreSparkSubmitOperator

ARGS = [
    "--snapshot",
    "s3://bucket/runbooks/snapshots/x",
    "--out",
    "s3://bucket/runbooks/plans/x",
    "--failed",
    "4",
]


@pytest.fixture
def submitted(monkeypatch):
    """What the operator hands spark-submit; one local Spark master by default."""
    seen: dict = {}

    def record(self, context):
        seen.update(
            args=list(self.application_args),
            conf=dict(self.conf or {}),
            jars=self.jars,
            packages=self.packages,
            env=dict(self.env_vars or {}),
        )

    monkeypatch.setattr(SparkSubmitOperator, "execute", record)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.delenv("KAFKA_RUNBOOKS_SPARK_JARS", raising=False)
    monkeypatch.delenv("KAFKA_RUNBOOKS_SPARK_PACKAGES", raising=False)
    storage._STORES.clear()
    yield seen
    storage.set_options_provider(None)


def _task(**kwargs) -> DataStoreSparkSubmitOperator:
    with DAG("d", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        return DataStoreSparkSubmitOperator(
            task_id="plan", application="job.py", application_args=list(ARGS), **kwargs
        )


def _on_s3(monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_URL", "s3://bucket/runbooks")
    monkeypatch.setenv(
        "KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS",
        json.dumps(
            {"client_kwargs": {"endpoint_url": "http://s3.internal:9000", "region_name": "eu-west-1"}}
        ),
    )


def test_on_a_local_store_nothing_changes(submitted, monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_URL", str(tmp_path))
    monkeypatch.setenv("KAFKA_RUNBOOKS_SPARK_JARS", "/opt/s3a/hadoop-aws.jar")
    _task(conf={"spark.driver.memory": "1g"}).execute({})
    assert submitted == {
        "args": ARGS,
        "conf": {"spark.driver.memory": "1g"},
        "jars": None,
        "packages": None,
        "env": {},
    }


def test_on_s3_the_job_reads_and_writes_over_s3a_with_the_stores_settings(submitted, monkeypatch):
    _on_s3(monkeypatch)
    monkeypatch.setenv("KAFKA_RUNBOOKS_SPARK_JARS", "/opt/s3a/hadoop-aws.jar, /opt/s3a/bundle.jar")
    _task(conf={"spark.hadoop.fs.s3a.path.style.access": "false"}, jars="/opt/own.jar").execute({})
    assert submitted["args"] == [
        "--snapshot",
        "s3a://bucket/runbooks/snapshots/x",
        "--out",
        "s3a://bucket/runbooks/plans/x",
        "--failed",
        "4",
    ]
    conf = submitted["conf"]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://s3.internal:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "false"  # the task's own setting wins
    assert submitted["jars"] == "/opt/own.jar,/opt/s3a/hadoop-aws.jar,/opt/s3a/bundle.jar"
    assert submitted["env"] == {}  # no connection: S3A finds its own credentials


def test_the_store_connections_keys_reach_a_local_driver_only_through_its_environment(submitted, monkeypatch):
    _on_s3(monkeypatch)
    storage.set_options_provider(lambda protocol: {"key": "AKIAEXAMPLE", "secret": "s3cr3t-value"})
    _task().execute({})
    assert submitted["env"] == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}
    on_command_line = json.dumps([submitted["args"], submitted["conf"], submitted["jars"]])
    assert "s3cr3t-value" not in on_command_line and "AKIAEXAMPLE" not in on_command_line


@pytest.mark.parametrize("master", ["yarn", "k8s://https://kubernetes.default.svc:443"])
def test_a_yarn_or_kubernetes_spark_never_gets_the_keys(submitted, monkeypatch, master):
    _on_s3(monkeypatch)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": master}))
    storage.set_options_provider(lambda protocol: {"key": "AKIAEXAMPLE", "secret": "s3cr3t-value"})
    _task().execute({})
    assert submitted["env"] == {}
    assert "s3cr3t-value" not in json.dumps(submitted)


# ---------------------------------------------------------------- SparkJobOperator: the connection decides


class _TaskInstance:
    """The fields of Airflow's task instance the operator names its Connect session by."""

    dag_id, run_id, task_id, map_index, try_number = "d", "manual__1", "plan", -1, 1


def _job_task(**kwargs):
    from kafka_runbooks_airflow.operators.spark import SparkJobOperator
    from kafka_runbooks_airflow.spark_connect import spark_job_path

    with DAG("d", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        return SparkJobOperator(task_id="plan", application=spark_job_path("cluster_health.py"), **kwargs)


def test_a_spark_connection_still_runs_spark_submit(submitted, tmp_path):
    task = _job_task(application_args=["--snapshot", str(tmp_path / "s"), "--output", str(tmp_path / "o")])
    task.execute({"ti": _TaskInstance()})
    assert submitted["args"] == ["--snapshot", str(tmp_path / "s"), "--output", str(tmp_path / "o")]


def test_a_spark_connect_server_that_is_not_there_fails_the_task_naming_it(submitted, monkeypatch, tmp_path):
    """Nothing listens on the connection's port: the task fails with the server's URL after the
    client's bounded retries (the test ending at all is the bound), and spark-submit never runs."""
    import socket

    from kafka_runbooks_airflow.spark_connect import SparkConnectUnavailable

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port, "password": "s3cr3t-token"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    task = _job_task(application_args=["--snapshot", str(tmp_path / "s"), "--output", str(tmp_path / "o")])

    with pytest.raises(
        SparkConnectUnavailable, match=f"Spark Connect server sc://127.0.0.1:{port} did not answer"
    ) as err:
        task.execute({"ti": _TaskInstance()})
    assert "s3cr3t-token" not in str(err.value)
    assert submitted == {}
    assert not (tmp_path / "o").exists()


class _StubClient:
    def __init__(self) -> None:
        self.policies: list = []

    def set_retry_policies(self, policies) -> None:
        self.policies = list(policies)


class _StubSession:
    """What run_over_connect touches of a Connect session: its client's retry policies and stop()."""

    def __init__(self) -> None:
        self.client = _StubClient()
        self.retries_at_stop: list[int | None] = []

    def stop(self) -> None:
        self.retries_at_stop = [p.max_retries for p in self.client.policies]


@pytest.mark.parametrize("server_gone", [True, False])
def test_a_gone_server_is_not_waited_for_again_to_release_the_session(monkeypatch, tmp_path, server_gone):
    """The job's own retries already waited for the server; releasing its session with the same
    retries waited ~16 s more before the task could fail. A job's own error keeps them."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from kafka_runbooks_airflow import spark_connect as connect

    session = _StubSession()
    from types import SimpleNamespace

    builder = SimpleNamespace(create=lambda: session)
    monkeypatch.setattr(SparkSession.Builder, "remote", lambda self, url: builder)
    job = tmp_path / "job.py"
    mark = "UNAVAILABLE" if server_gone else "a job's own error"
    job.write_text(
        f"from pyspark.errors import PySparkException\ndef run(spark, argv):\n    raise PySparkException({mark!r})\n"
    )
    expected = connect.SparkConnectUnavailable if server_gone else PySparkException
    with pytest.raises(expected):
        connect.run_over_connect(str(job), [], "sc://127.0.0.1:1", connect.session_id("t"))
    assert session.retries_at_stop == ([0] if server_gone else [connect.CONNECT_RETRIES["max_retries"]])
