"""Spark reads a snapshot from the data store and writes its output back over ``s3a://``
(Hadoop's S3A connector, jars from Maven Central), against a real S3Proxy: the settings
``storage.spark_conf`` gives are the ones that work, and nothing touches a local folder."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq

from kafka_runbooks import storage
from kafka_runbooks_dev.local_spark import ensure_s3a_jars, spark_submit_command

JOB = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession, functions as F
    spark = SparkSession.builder.getOrCreate()
    replicas = spark.read.parquet(sys.argv[1] + "/replicas.parquet")
    per_broker = replicas.groupBy("replica").agg(F.count("*").alias("replicas")).orderBy("replica")
    per_broker.coalesce(1).write.mode("overwrite").json(sys.argv[2])
    spark.stop()
    """
)


def test_a_spark_job_reads_and_writes_the_store_over_s3a(s3proxy, monkeypatch, tmp_path):
    jars = ensure_s3a_jars()
    for key, value in s3proxy.env("spark-s3a").items():
        monkeypatch.setenv(key, value)
    storage._STORES.clear()
    store = storage.store()
    table = pa.table({"topic": ["t"] * 5, "partition": [0, 0, 1, 1, 2], "replica": [1, 2, 1, 3, 2]})
    local = tmp_path / "snapshot"
    local.mkdir()
    pq.write_table(table, local / "replicas.parquet")
    store.upload_dir(local, "snapshots/run1")

    job = tmp_path / "job.py"
    job.write_text(JOB)
    conf = {**storage.spark_conf(), "spark.jars": ",".join(str(j) for j in jars)}
    argv, env = spark_submit_command(
        job,
        [storage.s3a_url(store.url_of("snapshots/run1")), storage.s3a_url(store.url_of("plans/run1"))],
        master="local[1]",
        conf=conf,
    )
    env["HOME"] = str(tmp_path)  # no shared folder: the driver's own home is empty
    proc = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]

    parts = [k for k in store.list("plans/run1") if k.rsplit("/", 1)[-1].startswith("part-")]
    rows = [json.loads(line) for k in parts for line in (store.read_text(k) or "").splitlines()]
    assert rows == [
        {"replica": 1, "replicas": 2},
        {"replica": 2, "replicas": 2},
        {"replica": 3, "replicas": 1},
    ]
    assert "secret" not in " ".join(argv)
