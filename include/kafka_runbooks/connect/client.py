"""A small Kafka Connect REST client: list every connector in one call, restart what failed.

Connect answers (seen on a real 4.3.1 worker, and per KIP-745):

- ``GET /``: ``{"version": "4.3.1", ...}``. Whether the worker has KIP-745 is a property of
  the worker, so the client decides it once, from this version (>= 3.0; Confluent
  Platform ``-ccs``/``-ce`` >= 7.0, which ships Kafka 3.0), before its first restart.
- ``GET /connectors?expand=status&expand=info`` (>= 2.3): every connector with its state
  and tasks, in one call. An older worker answers a plain list of names; the client then
  reads each connector's ``/status`` (one call per connector).
- ``POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true`` (>= 3.0, KIP-745):
  ``202`` with the status body; it restarts the connector only if it failed and only its
  failed tasks. A worker older than 3.0 ignores the query parameters and answers ``204``
  having restarted the connector instance alone: the client then makes the per-task calls.
  When ``GET /`` gave no version, these two answers (and only these) decide for the worker;
  any other answer is about that one connector and is raised, never taken as "old worker".
- ``POST /connectors/{name}/restart`` (old call) answers ``500 Failed to start connector``
  and ``POST /connectors/{name}/tasks/{id}/restart`` ``500 Failed to start task`` when the
  worker tried and the start threw: a refused restart (:attr:`ConnectError.refused`).
- ``POST /connectors/{name}/tasks/{id}/restart``: ``204``; ``404`` names the unknown task.
- ``409`` while the group rebalances: nothing was restarted, try again later.
- A name containing ``/`` or ``%`` is accepted on create, but Connect's web server (Jetty
  12) answers ``400 Ambiguous URI path separator`` / ``... encoding`` (an HTML page, not
  Connect's JSON) to every per-connector path for it, even encoded, DELETE included:
  :class:`UnaddressableConnector`. (``?``, ``#``, spaces and ``>`` work when encoded.)

Credentials (basic auth, client certificates) live in the ``requests`` session and never
appear in ``repr``, in exceptions or in logs; error messages carry the URL without them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests

from kafka_runbooks.errors import BadInput, CallFailed, Unreachable

FAILED = "FAILED"
DEFAULT_TIMEOUT_S = 30.0


class ConnectError(CallFailed):
    """The Connect REST API could not be reached or refused a request."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        """The worker tried and the start threw: ``500 Failed to start connector/task``.

        The restart was made and failed at once, as if the connector had failed again.
        """
        return self.status == 500

    @property
    def counts_as_restart(self) -> bool:
        """Whether the back-off and the give-up count this answer like a restart made.

        Every answer that is not a success does (any 4xx or 5xx, a timeout, a refused
        connection: status None), except the documented no-op ``409`` (a rebalance is in
        progress, nothing was restarted, the next sweep may succeed). Counting only 500 let
        a 400, 403 or 503 be retried every sweep forever, never backed off, never given up.
        """
        return self.status != 409


class ConnectUnreachable(ConnectError, Unreachable):
    """No answer from the worker (connection refused, DNS, TLS, timeout)."""


class UnknownConnector(ConnectError):
    """The worker does not know this connector."""


class UnknownTask(ConnectError):
    """The connector has no task with this id."""


class RebalanceInProgress(ConnectError):
    """409: the Connect group is rebalancing; nothing was restarted."""


class UnaddressableConnector(ConnectError):
    """The worker's web server refuses every per-connector path for this name.

    Connect accepts names containing ``/`` or ``%`` on create, but Jetty answers
    ``400 Ambiguous URI path separator/encoding`` to ``/connectors/{name}/...`` for them,
    however the name is encoded: such a connector cannot be restarted, paused, stopped or
    deleted over REST. Retrying never helps; :func:`unaddressable_advice` says what does.
    """

    def __init__(self, name: str, answer: str) -> None:
        super().__init__(f"{answer}. {unaddressable_advice(name)}", 400)
        self.connector = name
        self.answer = answer  # what the worker said, without the advice


def unaddressable_advice(name: str) -> str:
    """What an operator can do about a connector Connect's REST API cannot address."""
    return (
        f"Connect's REST API cannot address connector {name!r}: its web server answers HTTP 400 "
        "'Ambiguous URI path' to every per-connector path for a name containing '/' or '%', "
        "even encoded (restart, pause, stop and DELETE included). Nothing can restart it over "
        "REST, so auto-restart does not retry it. To fix: copy its config (GET /connectors?expand=info), "
        "remove it by writing tombstones (null values) for the keys "
        f"'connector-{name}' and 'target-state-{name}' to the Connect cluster's config topic "
        "(config.storage.topic), which is what DELETE does, then create it again under a name "
        "without '/' or '%' (a sink's new name is a new consumer group: carry its offsets over "
        "with PATCH /connectors/{new}/offsets if needed)."
    )


def kip745_from_version(version: str | None) -> bool | None:
    """Whether a worker of this version has KIP-745 (None: the version says nothing).

    Apache Kafka >= 3.0; Confluent Platform versions (``7.5.0-ccs``, ``7.5.0-ce``) are
    four majors ahead (CP 7.0 ships Kafka 3.0).
    """
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if re.search(r"-(ccs|ce)\b", version or ""):
        return major >= 7
    return (major, minor) >= (3, 0)


@dataclass(frozen=True)
class TaskStatus:
    task_id: int
    state: str
    worker_id: str | None = None
    trace: str | None = None

    @property
    def failed(self) -> bool:
        """Whether the worker reports this task FAILED (the only state a restart is meant for)."""
        return self.state == FAILED


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    state: str
    type: str | None = None
    worker_id: str | None = None
    trace: str | None = None
    tasks: tuple[TaskStatus, ...] = ()

    @property
    def connector_failed(self) -> bool:
        """Whether the connector instance itself is FAILED (its tasks are judged apart)."""
        return self.state == FAILED

    @property
    def failed_task_ids(self) -> list[int]:
        """Ids of the tasks the worker reports FAILED, in task order."""
        return [t.task_id for t in self.tasks if t.failed]

    @property
    def failed(self) -> bool:
        """The connector or any of its tasks is FAILED."""
        return self.connector_failed or bool(self.failed_task_ids)

    @property
    def task_ids(self) -> list[int]:
        """Ids of every task the status lists, in task order."""
        return [t.task_id for t in self.tasks]

    @classmethod
    def from_status(
        cls, name: str, status: dict[str, Any], info: dict[str, Any] | None = None
    ) -> ConnectorStatus:
        """Parse ``GET /connectors/<name>/status`` (and the connector info, when read): a missing state
        stays UNKNOWN, never RUNNING."""
        conn = status.get("connector") or {}
        tasks = tuple(
            sorted(
                (
                    TaskStatus(
                        task_id=int(t["id"]),
                        state=str(t.get("state", "UNKNOWN")),
                        worker_id=t.get("worker_id"),
                        trace=t.get("trace"),
                    )
                    for t in status.get("tasks") or []
                ),
                key=lambda t: t.task_id,
            )
        )
        return cls(
            name=name,
            state=str(conn.get("state", "UNKNOWN")),
            type=status.get("type") or (info or {}).get("type"),
            worker_id=conn.get("worker_id"),
            trace=conn.get("trace"),
            tasks=tasks,
        )

    def as_dict(self) -> dict[str, Any]:
        """The status as the sweep's report and decision records show it (task id -> state)."""
        return {
            "name": self.name,
            "type": self.type,
            "state": self.state,
            "tasks": {str(t.task_id): t.state for t in self.tasks},
            "failed_tasks": self.failed_task_ids,
        }


@dataclass(frozen=True)
class RestartOutcome:
    """What one restart did: which API, how many calls, what the worker answered."""

    connector: str
    method: str  # "kip-745" or "legacy"
    calls: int
    restarted_connector: bool
    restarted_tasks: tuple[int, ...]
    statuses: tuple[int, ...] = ()
    body: dict[str, Any] | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """What was restarted and each HTTP status the worker answered, for the decision record."""
        return {
            "connector": self.connector,
            "method": self.method,
            "calls": self.calls,
            "restarted_connector": self.restarted_connector,
            "restarted_tasks": list(self.restarted_tasks),
            "http_statuses": list(self.statuses),
        }


def _strip_credentials(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _q(segment: str | int) -> str:
    """One URL path segment: connector names may hold '>', spaces, '.' (MirrorMaker 2)."""
    return quote(str(segment), safe="")


class ConnectClient:
    """Kafka Connect REST client over ``requests``; counts the HTTP calls it makes.

    :param url: the worker's REST URL, e.g. ``http://connect:8083`` (any worker: the group
        forwards restarts to the leader).
    :param auth: ``(user, password)`` for basic auth, or None.
    :param verify: TLS verification: True, False or a CA bundle path.
    :param cert: client certificate: a path, or ``(cert, key)`` paths.
    :param kip745: None = decide from the worker's version (``GET /``, read once, before
        the first restart); True/False = known.
    """

    def __init__(
        self,
        url: str,
        *,
        auth: tuple[str, str] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        kip745: bool | None = None,
        session: requests.Session | None = None,
    ) -> None:
        if not url or "://" not in url:
            raise BadInput(f"Connect URL must be absolute, like http://host:8083; got {url!r}")
        if urlsplit(url).scheme not in ("http", "https"):
            raise BadInput(f"Connect URL must be http or https; got {_strip_credentials(url)!r}")
        self.url = _strip_credentials(url)
        self.timeout_s = timeout_s
        self.kip745 = kip745
        self.worker_version: str | None = None
        self._version_read = kip745 is not None
        self.calls = 0
        self._session = session or requests.Session()
        if auth is not None:
            self._session.auth = auth
        self._session.verify = verify
        if cert is not None:
            self._session.cert = cert
        self._session.headers.update({"Accept": "application/json"})

    def __repr__(self) -> str:  # never the credentials
        return f"ConnectClient({self.url!r})"

    def close(self) -> None:
        """Close the HTTP session (its pooled connections to the worker)."""
        self._session.close()

    def __enter__(self) -> ConnectClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ HTTP

    def _request(self, method: str, path: str, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout_s)
        self.calls += 1
        try:
            return self._session.request(method, f"{self.url}{path}", **kwargs)
        except requests.RequestException as exc:
            # the exception text may echo the URL; ours carries no credentials
            raise ConnectUnreachable(f"{method} {self.url}{path}: no answer ({type(exc).__name__})") from None

    @staticmethod
    def _message(resp: requests.Response) -> str:
        try:
            body = resp.json()
            if isinstance(body, dict) and body.get("message"):
                return str(body["message"])
        except ValueError:
            pass
        title = re.search(r"<title>([^<]*)</title>", resp.text or "", re.IGNORECASE)
        if title:  # Jetty's own error page, before Connect saw the request
            return title.group(1).strip()
        return resp.text[:300]

    def _error(self, resp: requests.Response, what: str, connector: str | None = None) -> ConnectError:
        message = self._message(resp)
        msg = f"{what}: HTTP {resp.status_code}: {message}"
        if resp.status_code == 409:
            return RebalanceInProgress(msg, 409)
        if connector is not None and resp.status_code == 400 and "ambiguous uri" in message.lower():
            return UnaddressableConnector(connector, msg)
        return ConnectError(msg, resp.status_code)

    # ------------------------------------------------------------------ reads

    def server_info(self) -> dict[str, Any]:
        """``GET /``: the worker's version, commit and Kafka cluster id."""
        resp = self._request("GET", "/")
        if resp.status_code != 200:
            raise self._error(resp, "reading the worker's version")
        return resp.json()

    def supports_kip745(self) -> bool | None:
        """Whether the worker has KIP-745, decided once per client from its version.

        ``None`` when ``GET /`` gave no usable version: then the first ``202`` or ``204``
        answer to a KIP-745 call decides. ``ConnectUnreachable`` is raised (the restart
        could not be made either).
        """
        if not self._version_read:
            self._version_read = True
            try:
                self.worker_version = str(self.server_info().get("version") or "") or None
            except ConnectUnreachable:
                self._version_read = False
                raise
            except (ConnectError, ValueError, AttributeError):
                self.worker_version = None
            if self.kip745 is None:
                self.kip745 = kip745_from_version(self.worker_version)
        return self.kip745

    def list_connectors(self) -> dict[str, ConnectorStatus]:
        """Every connector with its state and tasks: one call on a worker >= 2.3."""
        resp = self._request("GET", "/connectors", params=[("expand", "status"), ("expand", "info")])
        if resp.status_code != 200:
            raise self._error(resp, "listing connectors")
        body = resp.json()
        if isinstance(body, list):  # a worker older than 2.3 ignores expand
            return {name: self.connector_status(name) for name in body}
        return {
            name: ConnectorStatus.from_status(name, entry.get("status") or {}, entry.get("info"))
            for name, entry in body.items()
        }

    def connector_status(self, name: str) -> ConnectorStatus:
        """``GET /connectors/<name>/status``; UnknownConnector on 404, a mapped ConnectError on any other
        non-200."""
        resp = self._request("GET", f"/connectors/{_q(name)}/status")
        if resp.status_code == 404:
            raise UnknownConnector(f"unknown connector {name!r} on {self.url}", 404)
        if resp.status_code != 200:
            raise self._error(resp, f"reading the status of {name!r}", name)
        return ConnectorStatus.from_status(name, resp.json())

    # ------------------------------------------------------------------ restarts

    def restart_connector(self, name: str) -> int:
        """The old call: restart the connector instance only (not its tasks)."""
        resp = self._request("POST", f"/connectors/{_q(name)}/restart")
        if resp.status_code == 404:
            raise UnknownConnector(f"unknown connector {name!r} on {self.url}", 404)
        if resp.status_code not in (200, 202, 204):
            raise self._error(resp, f"restarting connector {name!r}", name)
        return resp.status_code

    def restart_task(self, name: str, task_id: int) -> int:
        """``POST /connectors/<name>/tasks/<id>/restart``: restart one task; the HTTP status. A 404 is told
        apart as UnknownTask or UnknownConnector from the worker's message."""
        resp = self._request("POST", f"/connectors/{_q(name)}/tasks/{_q(task_id)}/restart")
        if resp.status_code == 404:
            message = self._message(resp)
            if "task" in message.lower():
                raise UnknownTask(f"connector {name!r} has no task {task_id} on {self.url}: {message}", 404)
            raise UnknownConnector(f"unknown connector {name!r} on {self.url}", 404)
        if resp.status_code not in (200, 202, 204):
            raise self._error(resp, f"restarting task {name}/{task_id}", name)
        return resp.status_code

    def restart(
        self,
        name: str,
        *,
        include_tasks: bool = True,
        only_failed: bool = True,
        known: ConnectorStatus | None = None,
    ) -> RestartOutcome:
        """Restart a connector (and its tasks) with one KIP-745 call where the worker has it.

        On an older worker, the connector call (when the connector failed or ``only_failed``
        is false) and one call per task to restart (FAILED ones when ``only_failed``).
        ``known``: the status the caller already read (saves a call on the old path). Any
        answer but a restart is raised for this connector alone: it never changes how
        the client restarts the others.
        """
        support = self.supports_kip745()
        calls_before = self.calls
        statuses: list[int] = []
        legacy_connector_done = False
        if support is not False:
            outcome = self._restart_kip745(name, include_tasks, only_failed, support, calls_before, statuses)
            if outcome is not None:
                return outcome
            legacy_connector_done = True
        return self._restart_legacy(
            name, include_tasks, only_failed, known, calls_before, statuses, legacy_connector_done
        )

    def _restart_kip745(
        self,
        name: str,
        include_tasks: bool,
        only_failed: bool,
        support: bool | None,
        calls_before: int,
        statuses: list[int],
    ) -> RestartOutcome | None:
        """The one KIP-745 call; its outcome, or None when the worker answered 204: one without
        KIP-745 ignored the flags and restarted the connector instance only, so its tasks need
        their own calls (known from the answer only when the version said nothing)."""
        flags = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        resp = self._request("POST", f"/connectors/{_q(name)}/restart", params=flags)
        statuses.append(resp.status_code)
        if resp.status_code in (200, 202):
            self.kip745 = True
            body = resp.json() if resp.content else {}
            status = ConnectorStatus.from_status(name, body) if body else None
            return RestartOutcome(
                connector=name,
                method="kip-745",
                calls=self.calls - calls_before,
                restarted_connector=bool(status and status.state == "RESTARTING"),
                restarted_tasks=tuple(t.task_id for t in status.tasks if t.state == "RESTARTING")
                if status
                else (),
                statuses=tuple(statuses),
                body=body,
            )
        if resp.status_code == 404 and "unknown connector" in self._message(resp).lower():
            raise UnknownConnector(f"unknown connector {name!r} on {self.url}", 404)
        if resp.status_code != 204:
            raise self._error(resp, f"restarting {name!r}", name)
        if support is None:
            self.kip745 = False
        return None

    def _restart_legacy(
        self,
        name: str,
        include_tasks: bool,
        only_failed: bool,
        known: ConnectorStatus | None,
        calls_before: int,
        statuses: list[int],
        connector_done: bool,
    ) -> RestartOutcome:
        """The old path: the connector call unless a 204 already restarted it, then one call per
        task to restart. Only what the status shows failed, when ``only_failed``: a healthy task
        is not restarted for nothing."""
        status = known or self.connector_status(name)
        restarted_connector = connector_done
        if not connector_done and (status.connector_failed or not only_failed):
            statuses.append(self.restart_connector(name))
            restarted_connector = True
        tasks: list[int] = []
        if include_tasks:
            for task_id in status.failed_task_ids if only_failed else status.task_ids:
                statuses.append(self.restart_task(name, task_id))
                tasks.append(task_id)
        return RestartOutcome(
            connector=name,
            method="legacy",
            calls=self.calls - calls_before,
            restarted_connector=restarted_connector,
            restarted_tasks=tuple(tasks),
            statuses=tuple(statuses),
        )

    # ------------------------------------------------------------------ helpers for tests and tools

    def put_connector(self, name: str, config: dict[str, str]) -> dict[str, Any]:
        """``PUT /connectors/<name>/config``: create or reconfigure a connector; the worker's answer (name,
        config, tasks)."""
        resp = self._request("PUT", f"/connectors/{_q(name)}/config", json=config)
        if resp.status_code not in (200, 201):
            raise self._error(resp, f"configuring {name!r}")
        return resp.json()

    def delete_connector(self, name: str) -> None:
        """``DELETE /connectors/<name>``; a connector already gone (404) is not an error."""
        resp = self._request("DELETE", f"/connectors/{_q(name)}")
        if resp.status_code not in (200, 204, 404):
            raise self._error(resp, f"deleting {name!r}", name)

    def wait_for(
        self, name: str, predicate, timeout_s: float = 60.0, interval_s: float = 0.5
    ) -> ConnectorStatus:
        """Poll the connector's status until ``predicate(status)``; raise ConnectError on timeout."""
        deadline = time.monotonic() + timeout_s
        last: ConnectorStatus | None = None
        while time.monotonic() < deadline:
            try:
                last = self.connector_status(name)
                if predicate(last):
                    return last
            except UnknownConnector:
                pass
            time.sleep(interval_s)
        raise ConnectError(f"connector {name!r} not in the expected state after {timeout_s:.0f}s: {last}")


def client_from_fields(
    host: str | None,
    *,
    port: int | None = None,
    schema: str | None = None,
    login: str | None = None,
    password: str | None = None,
    extra: dict[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ConnectClient:
    """A client from an Airflow ``http`` connection's fields (no Airflow import here).

    ``host`` may be a full URL (``http://connect:8083``) or a host name, with ``schema`` as
    the scheme (``http`` by default) and ``port``. ``login``/``password``: basic auth.
    Extras: ``verify`` (true/false or a CA bundle path), ``cert`` and ``key`` (client
    certificate paths), ``timeout`` (seconds).
    """
    if not host:
        raise BadInput("the Connect connection has no host: set it to the REST URL, e.g. http://connect:8083")
    extra = dict(extra or {})
    if "://" in host:
        url = host.rstrip("/")
        if port and urlsplit(url).port is None:
            parts = urlsplit(url)
            url = urlunsplit((parts.scheme, f"{parts.netloc}:{port}", parts.path, "", ""))
    else:
        url = f"{schema or 'http'}://{host}" + (f":{port}" if port else "")
    verify: bool | str = extra.get("verify", True)
    if isinstance(verify, str) and verify.lower() in ("true", "false"):
        verify = verify.lower() == "true"
    cert = extra.get("cert")
    if cert and extra.get("key"):
        cert = (cert, extra["key"])
    auth = (login, password or "") if login else None
    return ConnectClient(
        url, auth=auth, verify=verify, cert=cert, timeout_s=float(extra.get("timeout", timeout_s))
    )
