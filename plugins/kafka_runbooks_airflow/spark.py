"""Locating the project's Spark jobs for SparkSubmitOperator."""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT = Path(__file__).resolve().parents[2] / "spark_jobs"


def spark_job_path(name: str) -> str:
    """Absolute path of a job in ``spark_jobs/`` (``$KAFKA_RUNBOOKS_SPARK_JOBS`` overrides the folder)."""
    folder = Path(os.environ.get("KAFKA_RUNBOOKS_SPARK_JOBS") or _DEFAULT)
    return str(folder / name)
