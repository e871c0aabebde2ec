"""Portable folder names: a run id or a connection id as a name that stays inside its folder.

Where the data lives is the store's (:mod:`kafka_runbooks.storage`: ``KAFKA_RUNBOOKS_DATA_URL``,
else ``KAFKA_RUNBOOKS_DATA_DIR``; ``storage.data_dir`` is that location as a local folder).
"""

from __future__ import annotations

import re


def safe_name(text: str) -> str:
    """A run id such as ``manual__2026-11-21T23:00:00+00:00`` as a portable folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"
