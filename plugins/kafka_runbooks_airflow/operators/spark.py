"""Operator: a Spark job over the runbooks' data store, wherever that store is.

The jobs in ``spark_jobs/`` read a snapshot and write their output at the URLs they are given.
With a local data folder those are paths and nothing changes. With an object store
(``KAFKA_RUNBOOKS_DATA_URL=s3://…``) the snapshot and the plan are objects, so the job reads
and writes them through Hadoop's S3A connector: the ``s3://`` URLs become ``s3a://``, the
store's Spark settings (:func:`kafka_runbooks.storage.spark_conf`) are added and the S3A jars
go on the class path. All of it is decided when the task runs (from the worker's settings),
never when the DAG file is parsed.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

JARS_ENV = "KAFKA_RUNBOOKS_SPARK_JARS"  # comma list of jar paths or URLs: hadoop-aws, the AWS SDK bundle, ...
PACKAGES_ENV = "KAFKA_RUNBOOKS_SPARK_PACKAGES"  # or Maven coordinates Spark resolves itself


class DataStoreSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` whose job reads and writes the runbooks' data store.

    On an ``s3://`` store: arguments naming the store as ``s3://`` are passed as ``s3a://``;
    ``spark.hadoop.fs.s3a.*`` settings for the store (endpoint, path style, region) join the
    conf; ``$KAFKA_RUNBOOKS_SPARK_JARS`` / ``$KAFKA_RUNBOOKS_SPARK_PACKAGES`` join ``jars`` /
    ``packages`` (a Spark image that carries the S3A jars needs neither). Credentials are never
    put on the command line: S3A reads ``AWS_*`` from the driver's environment (spark-submit
    inherits the worker's), an instance role, or IRSA with ``fs.s3a.aws.credentials.provider`` set
    (docs/production.md). On any other store nothing changes.
    """

    def execute(self, context: Any) -> None:
        """spark-submit the job; on an s3:// store first point its arguments at s3a:// and add the store's
        settings, jars and credentials."""
        from kafka_runbooks import storage

        if storage.protocol_of(storage.data_url()) == "s3":
            self.application_args = [_as_s3a(a) for a in self.application_args or []]
            self.conf = {**storage.spark_conf(), **(self.conf or {})}
            self.jars = _joined(self.jars, os.environ.get(JARS_ENV))
            self.packages = _joined(self.packages, os.environ.get(PACKAGES_ENV))
            self._pass_credentials()
            self.log.info(
                "the job reads and writes the data store over s3a:// (%d Spark setting(s) added, jars: %s)",
                len(storage.spark_conf()),
                "from " + JARS_ENV if os.environ.get(JARS_ENV) else "the Spark image's own",
            )
        return super().execute(context)

    def _pass_credentials(self) -> None:
        """The store's keys from ``KAFKA_RUNBOOKS_DATA_CONN_ID`` into spark-submit's environment.

        Only for a driver spark-submit starts on this worker (local or standalone client mode):
        for YARN and Kubernetes the provider would put them on the command line, so there S3A
        must find its own (an instance role, IRSA with the web-identity provider) and nothing is passed.
        """
        from kafka_runbooks import storage

        keys = storage.s3_environment()
        if not keys:
            return
        hook = self._get_hook()
        if hook._is_yarn or hook._is_kubernetes:
            self.log.warning(
                "the data store's keys are not passed to a YARN or Kubernetes Spark (they would be on its "
                "command line): give its driver and executors a role for the bucket (docs/production.md: IRSA needs "
                "fs.s3a.aws.credentials.provider)"
            )
            return
        from airflow.sdk.log import mask_secret

        for name, value in keys.items():
            mask_secret(value, name)  # masked in every log line of this task, whatever logs it
        self.env_vars = {**keys, **(self.env_vars or {})}


def _as_s3a(arg: Any) -> Any:
    from kafka_runbooks import storage

    return storage.s3a_url(arg) if isinstance(arg, str) and arg.startswith("s3://") else arg


def _joined(*parts: str | None) -> str | None:
    """Comma lists joined (Spark's form for jars and packages); None when all are empty."""
    items = [item.strip() for part in parts if part for item in part.split(",") if item.strip()]
    return ",".join(items) or None


CONNECT_CONN_TYPE = "spark_connect"


class SparkJobOperator(DataStoreSparkSubmitOperator):
    """One of ``spark_jobs/`` on the Spark the connection names: a running Spark Connect server,
    or spark-submit.

    The connection's type decides, when the task runs: ``spark_connect`` runs the job's
    ``run(spark, argv)`` here in the task against the server (a NEW isolated session per task
    try, closed at the end: no JVM, no SparkSession start, only the analysis); ``spark``
    (YARN, Kubernetes, standalone, local) is :class:`DataStoreSparkSubmitOperator` unchanged.
    Over Connect the job's small files go through the data store from this worker and the
    server reads and writes the parquet files at the same place (``s3a://`` for an ``s3://``
    store), so the server needs the store's S3A settings and access (docs/production.md).
    A job that exits non-zero (2: no plan keeps the rules) fails the task as spark-submit's would.
    """

    def execute(self, context: Any) -> None:
        """Run the job on a Spark Connect server when the connection is one, else by spark-submit."""
        if self._conn_type() != CONNECT_CONN_TYPE:
            return super().execute(context)
        return self._execute_over_connect(context)

    def _conn_type(self) -> str:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(self._conn_id).conn_type

    def _execute_over_connect(self, context: Any) -> None:
        from airflow.exceptions import AirflowException
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from kafka_runbooks_airflow.spark_connect import run_over_connect, server_of, session_id

        ti = context["ti"]
        sid = session_id(ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.try_number)
        url = SparkConnectHook(self._conn_id).get_connection_url()
        args = (
            [_as_s3a(a) for a in self.application_args or []]
            if _on_s3()
            else list(self.application_args or [])
        )
        self.log.info(
            "running %s over Spark Connect at %s (session %s)", self.application, server_of(url), sid
        )
        code = run_over_connect(self.application, [str(a) for a in args], url, sid)
        if code != 0:
            raise AirflowException(
                f"{self.application} exited with code {code} over Spark Connect at {server_of(url)}"
            )


def _on_s3() -> bool:
    from kafka_runbooks import storage

    return storage.protocol_of(storage.data_url()) == "s3"
