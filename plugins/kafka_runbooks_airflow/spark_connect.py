"""Locating the project's Spark jobs, and running one over Spark Connect in the task itself.

Named for Spark Connect (not ``spark``: ``operators/spark.py`` is the operator that uses it, and
``connect`` here means Kafka Connect); the dev tooling's ``kafka_runbooks_dev.spark_connect``
starts the local server this talks to.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from pathlib import Path
from types import ModuleType

_DEFAULT = Path(__file__).resolve().parents[2] / "spark_jobs"


def spark_job_path(name: str) -> str:
    """Absolute path of a job in ``spark_jobs/`` (``$KAFKA_RUNBOOKS_SPARK_JOBS`` overrides the folder)."""
    folder = Path(os.environ.get("KAFKA_RUNBOOKS_SPARK_JOBS") or _DEFAULT)
    return str(folder / name)


# ---------------------------------------------------------------- Spark Connect

# The client's retries for a server that does not answer: about 20 s in all (0.5+1+2+4+8+4.5 s),
# then the task fails naming the server. pyspark's default retries for ten minutes or more.
CONNECT_RETRIES = {"max_retries": 5, "initial_backoff": 500, "backoff_multiplier": 2.0, "max_backoff": 8000}
# What the server (or gRPC) says when it is gone or is not the one that held the session.
_SERVER_GONE = ("UNAVAILABLE", "SESSION_NOT_FOUND", "SESSION_CHANGED", "Connection refused", "Socket closed")


# pyspark's functions (``F.count``...) build Connect or classic columns by this variable, which
# ``builder.remote()`` sets for the rest of the process; a classic session in the same process (the
# tests compare both) needs it gone again once the Connect session is closed.
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"


class SparkConnectUnavailable(RuntimeError):
    """The Spark Connect server did not answer, died, or restarted (and lost the session) mid-job."""


def load_job(application: str) -> ModuleType:
    """The job file as a module (its ``run(spark, argv)``), loaded from its path, once per process
    under a name of its own so two jobs never share module state."""
    path = Path(application)
    name = f"kafka_runbooks_spark_job_{path.stem}"
    found = sys.modules.get(name)
    if found is not None and getattr(found, "__file__", None) == str(path):
        return found
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no Spark job at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def session_id(*parts: object) -> str:
    """A session id (a UUID, as Spark Connect requires) of its own for each task try: a retry never
    attaches to the session of the try before it, and a try's id names it in the server's log."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kafka-runbooks/" + "/".join(str(p) for p in parts)))


def with_session_id(url: str, sid: str) -> str:
    """``url`` (``sc://host:port``, maybe ``/;token=…``) with ``session_id`` among its parameters."""
    base, _, params = url.partition("/;")
    kept = [p for p in params.split(";") if p and not p.startswith("session_id=")]
    return f"{base.rstrip('/')}/;" + ";".join([*kept, f"session_id={sid}"])


def server_of(url: str) -> str:
    """The URL without its parameters (a token must not reach a log line or an error)."""
    return url.partition("/;")[0].rstrip("/")


def run_over_connect(application: str, argv: list[str], url: str, sid: str) -> int:
    """Run a job's ``run(spark, argv)`` in a NEW session on the server at ``url``, closed at the end.

    A new, isolated session per call (``create()``, never a cached one): two tasks never share
    temporary views, configuration or cached data. A server that is gone, dies or restarts
    mid-job raises :class:`SparkConnectUnavailable` naming it, after bounded retries.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    job = load_job(application)
    was_remote = CONNECT_MODE_ENV in os.environ
    spark = SparkSession.builder.remote(with_session_id(url, sid)).create()
    spark.client.set_retry_policies([DefaultPolicy(**CONNECT_RETRIES)])
    gone = None
    try:
        return job.run(spark, argv)
    except Exception as exc:
        gone = connect_error(exc, url)
        if gone is None:
            raise
        raise gone from exc
    finally:
        if gone is not None:  # the retries just failed: a release would wait them out again (~16 s)
            spark.client.set_retry_policies([DefaultPolicy(max_retries=0)])
        _close(spark)
        if not was_remote:  # pyspark marks the whole process as Connect-only: undo it (see above)
            os.environ.pop(CONNECT_MODE_ENV, None)


def connect_error(exc: BaseException, url: str) -> SparkConnectUnavailable | None:
    """The one place that tells "the server is gone" from a job's own error (None for those)."""
    from pyspark.errors import PySparkException

    if not isinstance(exc, PySparkException):
        return None
    text = str(exc)
    if not any(mark in text for mark in _SERVER_GONE):
        return None
    first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
    return SparkConnectUnavailable(
        f"Spark Connect server {server_of(url)} did not answer, died or restarted during the job "
        f"(the session is lost; a retry starts a new one): {first}"
    )


def _close(spark) -> None:
    """Release the session on the server; a server that is gone has nothing left to release, and
    the job's own outcome is what the task reports, so a failed release is only logged."""
    import logging

    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001
        logging.getLogger(__name__).warning("could not release the Spark Connect session: %s", exc)
