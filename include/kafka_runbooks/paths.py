"""Local names: the data folder when the data location is local, and portable folder names.

The data location is one setting (:mod:`kafka_runbooks.storage`): ``KAFKA_RUNBOOKS_DATA_URL``
(a path or an object store URL), else ``KAFKA_RUNBOOKS_DATA_DIR``. Everything runbooks keep
goes through the store; ``data_dir`` is that location as a local folder (the decision
journal's file when it is local).
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def data_dir() -> Path:
    """The local data folder: ``$KAFKA_RUNBOOKS_DATA_URL`` when it is a path, else
    ``$KAFKA_RUNBOOKS_DATA_DIR``, else ``$AIRFLOW_HOME/kafka_runbooks``, else ``~/kafka_runbooks``."""
    url = (os.environ.get("KAFKA_RUNBOOKS_DATA_URL") or "").strip()
    if url and "://" not in url:
        return Path(url)
    if url.startswith("file://"):
        return Path(url[len("file://") :])
    explicit = os.environ.get("KAFKA_RUNBOOKS_DATA_DIR")
    if explicit:
        return Path(explicit)
    home = os.environ.get("AIRFLOW_HOME")
    return Path(home) / "kafka_runbooks" if home else Path.home() / "kafka_runbooks"


def safe_name(text: str) -> str:
    """A run id such as ``manual__2026-11-21T23:00:00+00:00`` as a portable folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"
