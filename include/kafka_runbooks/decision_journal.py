"""The decision journal: every DECISION record made inside an Airflow task, also appended
as one JSON line to ``$KAFKA_RUNBOOKS_DATA_DIR/decisions/journal.jsonl``.

The task logs stay the audit trail; the journal is what the Kafka page of the Airflow UI
reads to show the last decisions across runs without opening logs. One ``write`` per
record on a file opened in append mode, so concurrent tasks do not interleave lines; the
file is rotated once it passes a few MiB (one old generation kept). Writing it never
fails a runbook: an unwritable journal only costs the page its list.

On an object store (``KAFKA_RUNBOOKS_DATA_URL``) nothing can be appended to: each record
is one object, ``decisions/<UTC day>/<time ns>-<random>.json``, so concurrent tasks on
different workers never overwrite each other; ``last`` reads the newest days' objects.

Named ``decision_journal``, not ``journal``: the unclean runbook keeps a journal of its own
(the replica orders it changed, ``unclean.elect.ReorderState``); :mod:`kafka_runbooks.decisions`
makes the records, this module keeps them.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from kafka_runbooks import storage

MAX_BYTES = 4 << 20
CONTEXT = {
    "dag_id": "AIRFLOW_CTX_DAG_ID",
    "run_id": "AIRFLOW_CTX_DAG_RUN_ID",
    "task_id": "AIRFLOW_CTX_TASK_ID",
}


def journal_path() -> Path:
    """The local decision journal file (JSON lines) under the data folder."""
    return storage.data_dir() / "decisions" / "journal.jsonl"


def append(record: dict[str, Any]) -> bool:
    """Append ``record`` with the task it was made in; only inside an Airflow task. True if written."""
    context = {k: os.environ.get(v) for k, v in CONTEXT.items()}
    if not context["dag_id"]:
        return False  # not in a task (tests, CLI): nothing to attribute the record to
    line = json.dumps({**context, **record}, sort_keys=True, default=str) + "\n"
    store = storage.store()
    if not store.is_local:
        now_ns = time.time_ns()
        day = time.strftime("%Y-%m-%d", time.gmtime(now_ns / 1e9))
        try:
            store.write_text(f"decisions/{day}/{now_ns:020d}-{uuid.uuid4().hex[:8]}.json", line)
        except OSError:
            return False
        return True
    path = journal_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_BYTES:
            os.replace(path, path.with_suffix(".1.jsonl"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def last(n: int = 50, path: Path | None = None) -> list[dict[str, Any]]:
    """The newest ``n`` records, newest first (unparsable lines skipped)."""
    if path is None and not storage.store().is_local:
        return _last_objects(n)
    path = path or journal_path()
    lines: deque[str] = deque(maxlen=n)
    for candidate in (path.with_suffix(".1.jsonl"), path):
        try:
            with open(candidate, encoding="utf-8") as fh:
                lines.extend(fh)
        except OSError:
            continue
    out = []
    for line in reversed(lines):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _last_objects(n: int, days: int = 7) -> list[dict[str, Any]]:
    """The newest ``n`` record objects of the last ``days`` UTC days, newest first."""
    store = storage.store()
    out: list[dict[str, Any]] = []
    now = time.time()
    for back in range(days):
        day = time.strftime("%Y-%m-%d", time.gmtime(now - back * 86400))
        for key in sorted(store.list(f"decisions/{day}"), reverse=True):
            try:
                out.append(json.loads(store.read_text(key) or ""))
            except (ValueError, OSError):
                continue
            if len(out) >= n:
                return out
    return out


def find(record_id: str, days: int = 7) -> dict[str, Any] | None:
    """The record with this ``record_id`` (what a DECISION facts line names), or None.

    Local journal: both generations, newest first; object store: the last ``days`` UTC days.
    A cheap substring test comes before parsing, so a lookup reads but does not parse the file.
    """
    needle = f'"record_id": "{record_id}"'
    store = storage.store()
    if not store.is_local:
        now = time.time()
        for back in range(days):
            day = time.strftime("%Y-%m-%d", time.gmtime(now - back * 86400))
            for key in sorted(store.list(f"decisions/{day}"), reverse=True):
                found = _parsed_if(store.read_text(key) or "", needle, record_id)
                if found is not None:
                    return found
        return None
    path = journal_path()
    for candidate in (path, path.with_suffix(".1.jsonl")):
        try:
            with open(candidate, encoding="utf-8") as fh:
                lines = fh.readlines()
        except OSError:
            continue
        for line in reversed(lines):
            found = _parsed_if(line, needle, record_id)
            if found is not None:
                return found
    return None


def _parsed_if(line: str, needle: str, record_id: str) -> dict[str, Any] | None:
    if needle not in line:
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if record.get("record_id") == record_id else None
