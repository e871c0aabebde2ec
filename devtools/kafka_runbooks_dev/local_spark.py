"""spark-submit on this machine, with this venv's PySpark and interpreter (tests and benchmarks).

The DAGs submit through the Spark provider; the tests and benchmarks that prove the jobs
run them the same way, ``spark-submit`` in ``local[2]`` mode, without going through Airflow.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOOPBACK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def spark_submit_command(
    job: Path | str,
    args: list[str],
    *,
    master: str = "local[2]",
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
    local_dir: Path | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` running ``job`` with ``args``; driver and workers use this interpreter.

    ``local_dir``: the folder for the JVM's scratch (see :func:`local_dir_settings`), which the
    caller removes once the JVM is gone; by default Spark's own, ``/tmp``.
    """
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    conf = {**LOOPBACK_CONF, **(conf or {})}
    if local_dir is not None:
        scratch_env, scratch_conf = local_dir_settings(local_dir, conf)
        env.update(scratch_env)
        conf.update(scratch_conf)
    argv = [str(bin_dir / "spark-submit"), "--master", master]
    if driver_memory:
        argv += ["--driver-memory", driver_memory]
    for key, value in _with_driver_jvm_options(conf).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(job), *args], env


def local_dir_settings(local_dir: Path, conf: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(env, conf)`` that keep a local-mode Spark JVM's scratch inside ``local_dir``.

    Spark puts its scratch in ``/tmp`` by default: ``spark-<uuid>`` (the driver's and executor's
    files; in local mode a copy of every ``spark.jars`` jar, 658 MB with the S3A jars),
    ``blockmgr-<uuid>`` (shuffle blocks), and in the JVM's ``java.io.tmpdir`` Spark Connect's
    ``artifacts-<uuid>`` and the native libraries snappy and lz4 unpack. The JVM deletes them at
    a clean exit only: a killed JVM (a test's SIGKILL, a stop that timed out) leaves them
    behind. ``SPARK_LOCAL_DIRS`` moves the first two, ``-Djava.io.tmpdir`` (added to the
    driver's Java options in ``conf``) the rest, so whoever started the JVM can remove them all.
    """
    local_dir.mkdir(parents=True, exist_ok=True)
    key = "spark.driver.extraJavaOptions"
    tmpdir = f"-Djava.io.tmpdir={local_dir}"
    java = f"{conf[key]} {tmpdir}" if conf.get(key) else tmpdir
    return {"SPARK_LOCAL_DIRS": str(local_dir)}, {key: java}


# Extra options for the driver's JVM (``$KR_SPARK_DRIVER_JVM_OPTIONS``): the test suite sets a
# quick-start JIT (C1 only, serial GC, as the local stack's Kafka JVMs have): a spark-submit of
# a small analysis then costs ~29 CPU-seconds instead of ~45 on this 2-core machine. Unset for
# benchmarks and the demo, where a long analysis wants the full JIT.
DRIVER_JVM_OPTIONS_ENV = "KR_SPARK_DRIVER_JVM_OPTIONS"


def _with_driver_jvm_options(conf: dict[str, str]) -> dict[str, str]:
    extra = os.environ.get(DRIVER_JVM_OPTIONS_ENV, "").strip()
    if not extra:
        return conf
    key = "spark.driver.extraJavaOptions"
    return {**conf, key: f"{extra} {conf[key]}" if conf.get(key) else extra}


S3A_POM = Path(__file__).resolve().parents[2] / "stack" / "spark-s3a" / "pom.xml"
S3A_LIB = Path(__file__).resolve().parents[2] / ".stack" / "s3a-lib"


def ensure_s3a_jars(lib_dir: Path = S3A_LIB) -> list[Path]:
    """Fetch Hadoop's S3A connector jars from Maven Central once (about 690 MB); their paths."""
    from kafka_runbooks_dev.localstack.jars import fetch_with_maven

    fetch_with_maven(S3A_POM, lib_dir, "the S3A jars")
    return sorted(lib_dir.glob("*.jar"))
