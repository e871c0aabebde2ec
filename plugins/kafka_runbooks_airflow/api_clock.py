"""Airflow's API server's clock, as a task reads it: the ``Date`` of the execution API's ``/health``.

The approval rules (:mod:`kafka_runbooks.approval`) compare times on one clock, the API server's:
it stamps a HITL answer's ``responded_at``. A task's own clock (``time.time()``, and in Airflow 3
``ti.start_date``, which the worker stamps) may be minutes off it. The execution API, which every
task already calls home to (``[core] execution_api_server_url``, default
``http://localhost:8080/execution/``), answers an unauthenticated ``GET <url>/health`` with an
HTTP ``Date`` header (uvicorn's, RFC 9110 IMF-fixdate, whole seconds, the server's clock): that is
the API server's "now" as a task can know it. Whole seconds: the true time is within the second
after the header's; the callers say which end they take (a deadline the start, so it is never
later than Airflow's own; the work's start the end, so an age is never shorter than the truth).

An unreachable server, an answer that is not the health route's, or a missing or unparsable
``Date`` is :class:`ClockUnreadable`: the time is unknown, and unknown never counts.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

import requests

from kafka_runbooks.errors import SafetyRefusal
from kafka_runbooks.evidence import AIRFLOW_API_SERVER, Stamp

ATTEMPTS = 3  # a passing hiccup of the API server does not refuse an approval
TIMEOUT_S = 10.0
PAUSE_S = 1.0
SECOND_MS = 1000


class ClockUnreadable(SafetyRefusal):
    """The API server's clock could not be read: a time that needed it is unknown, so nothing that
    depends on it counts (an approval is refused, a gate does not ask)."""


def health_url() -> str:
    """``<execution_api_server_url>/health``, the URL Airflow itself gives its workers."""
    from airflow.executors.base_executor import get_execution_api_server_url

    return get_execution_api_server_url().rstrip("/") + "/health"


def date_stamp(date: str | None, where: str) -> Stamp:
    """The start of the second an HTTP ``Date`` header names, on the API server's clock; ClockUnreadable
    when it is missing or not an aware time."""
    try:
        when = parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError):
        when = None
    if when is None or when.tzinfo is None:
        raise ClockUnreadable(f"{where} answered without a readable Date header ({date!r})")
    return Stamp.of(when, AIRFLOW_API_SERVER)


def api_server_now(attempts: int = ATTEMPTS) -> Stamp:
    """The API server's time now (the start of the second its ``Date`` names); ClockUnreadable after
    ``attempts`` failed reads, naming the URL and the last error."""
    url = health_url()
    last = "not asked"
    for attempt in range(attempts):
        if attempt:
            time.sleep(PAUSE_S)
        try:
            resp = requests.get(url, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if resp.status_code != 200:
            last = f"HTTP {resp.status_code} (not Airflow's execution API health route?)"
            continue
        return date_stamp(resp.headers.get("Date"), f"GET {url}")
    raise ClockUnreadable(
        f"{AIRFLOW_API_SERVER}'s clock could not be read: GET {url} failed {attempts} times, last: {last}"
    )


def latest_in_second(stamp: Stamp) -> Stamp:
    """The last millisecond of the second a ``Date`` names: a start taken this way makes every age
    measured from it at least the true one."""
    return stamp.plus_ms(SECOND_MS - 1)
