"""A real Airflow on loopback for end-to-end tests and the demo, and a small REST client for it.

Approval gates cannot be exercised with ``dag.test()`` (it waits forever at the gate), so gated
runbooks are tested against a running Airflow: ``airflow standalone`` (SQLite metadata DB,
LocalExecutor) started as a subprocess, driven and answered through the public REST API.

This module must not import Airflow: it drives Airflow from outside, as a user would. It starts
the ``airflow`` command of a given virtualenv and talks HTTP with ``requests``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import quote

import requests

from kafka_runbooks_dev.processes import group_alive, stat_fields

TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
LOG_TAIL_LINES = 60
REQUEST_TIMEOUT = 90  # seconds; generous, the api-server stalls for many seconds on a busy machine
# seconds between two reads of a run or task state while waiting: the scheduler hands a task on
# within ~0.4 s in the tests' Airflow, a 1 s poll added 0.5 s on average to every wait
STATE_POLL_S = 0.5
# keys Airflow adds to every task log record; task_log_text leaves them out
LOG_CONTEXT_KEYS = frozenset(
    {"dag_id", "task_id", "run_id", "map_index", "try_number", "ti_id", "filename", "lineno"}
)


class AirflowError(RuntimeError):
    """The local Airflow did not start, or the REST API refused a request; the message says why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the REST API refused


class AirflowLocal:
    """One ``airflow standalone`` under ``home``, listening on 127.0.0.1:``port``.

    ``dags_folders``: Airflow reads one dags folder, so several are merged into
    ``<home>/dags`` as symlinks to their top-level ``.py`` files and sub-folders (rebuilt at
    each start). ``connections``: conn_id -> Airflow connection JSON dict, passed as
    ``AIRFLOW_CONN_<ID>`` environment variables. DAGs stay paused at creation (Airflow's
    default); :meth:`trigger` unpauses the DAG it runs.
    """

    def __init__(
        self,
        home: Path,
        *,
        port: int = 8080,
        dags_folders: list[Path] | Path,
        plugins_folder: Path | None = None,
        connections: dict[str, dict] | None = None,
        extra_env: dict[str, str] | None = None,
        airflow_bin: Path | None = None,
    ) -> None:
        self.home = Path(home).resolve()
        self.port = port
        folders = [dags_folders] if isinstance(dags_folders, Path | str) else list(dags_folders)
        self.dags_folders = [Path(f).resolve() for f in folders]
        self.plugins_folder = Path(plugins_folder).resolve() if plugins_folder else self.home / "plugins"
        self.connections = dict(connections or {})
        self.extra_env = dict(extra_env or {})
        self.airflow_bin = Path(airflow_bin) if airflow_bin else Path(sys.executable).parent / "airflow"
        self.base_url = f"http://127.0.0.1:{port}"
        self.pid_file = self.home / "standalone.pid"
        self.log_file = self.home / "standalone.log"
        self._proc: subprocess.Popen | None = None
        self._scheduler_proc: subprocess.Popen | None = None  # a scheduler restart_scheduler started
        self._token: str | None = None
        self._http = requests.Session()

    # ------------------------------------------------------------------ process

    @property
    def dags_folder(self) -> Path:
        """The one folder Airflow reads: the given folder, or the merged symlink folder."""
        return self.dags_folders[0] if len(self.dags_folders) == 1 else self.home / "dags"

    def env(self) -> dict[str, str]:
        """The environment ``airflow standalone`` runs with (its components inherit it).

        The caller's own Airflow settings are left out: e.g. a test session's
        ``AIRFLOW__CORE__UNIT_TEST_MODE`` gives every component its own random JWT secret,
        and then every task fails with "Invalid auth token". Pass settings in ``extra_env``.
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "_AIRFLOW"))}
        env.update(
            {
                # standalone starts its components as `airflow ...` from PATH
                "PATH": f"{self.airflow_bin.parent}{os.pathsep}{env.get('PATH', '')}",
                "AIRFLOW_HOME": str(self.home),
                "NO_COLOR": "1",  # plain text in standalone.log
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.plugins_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                # tasks call home through the execution API; its default assumes port 8080
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                # the log servers default to 8793/8794; keep them off another Airflow's ports
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.port + 1),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.port + 2),
                # new DAG files show up in seconds (a new file is parsed at once); a changed one
                # within Airflow's default 30 s. Re-parsing every file every 5 s kept 0.66 of a
                # CPU busy on an idle Airflow here (0.10 at 300 s): tests that never change a DAG
                # file pass a long interval in extra_env
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
            }
        )
        for conn_id, conn in self.connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        env.update(self.extra_env)
        return env

    def _link_dags_folders(self) -> None:
        """Merge several dags folders into one folder of symlinks, since Airflow reads only one."""
        if len(self.dags_folders) == 1:
            return
        merged = self.home / "dags"
        if merged.exists():
            for entry in merged.iterdir():
                entry.unlink()
        merged.mkdir(parents=True, exist_ok=True)
        for folder in self.dags_folders:
            if not folder.is_dir():
                continue
            for src in sorted(folder.iterdir()):
                wanted = src.suffix == ".py" or (src.is_dir() and not src.name.startswith((".", "__")))
                if not wanted:
                    continue
                link = merged / src.name
                if link.is_symlink():
                    raise AirflowError(f"{src.name} is in two dags folders: {link.resolve()} and {src}")
                link.symlink_to(src)

    def _pid(self) -> int | None:
        """The pid of our running standalone process, if the pid file names a live one.

        A pid file alone is no proof (pids get reused, and stop() signals the whole group):
        the process must also run in ``home``, where start() put it.
        """
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._proc is not None and self._proc.pid == pid and self._proc.poll() is not None:
            return None
        try:
            return pid if Path(f"/proc/{pid}/cwd").resolve(strict=True) == self.home else None
        except OSError:
            return None

    def health(self) -> dict | None:
        """``/api/v2/monitor/health``, or None while the api-server does not answer."""
        try:
            resp = self._http.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
        except requests.RequestException:
            return None
        return resp.json() if resp.ok else None

    def is_healthy(self) -> bool:
        """True when the metadata DB, scheduler, dag-processor and triggerer all report healthy."""
        health = self.health()
        if not health:
            return False
        parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
        return all((health.get(p) or {}).get("status") == "healthy" for p in parts)

    def log_tail(self, lines: int = LOG_TAIL_LINES, component: str | None = None) -> str:
        """The last lines of the standalone log (of one component, e.g. ``api-server``)."""
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log file)"
        if component:
            text = [line for line in text if line.startswith(f"{component} ")]
        return "\n".join(text[-lines:])

    def _start_failure(self, what: str) -> AirflowError:
        return AirflowError(
            f"{what}; health: {self.health()}\n"
            f"--- api-server log tail:\n{self.log_tail(30, 'api-server')}\n"
            f"--- standalone log tail ({self.log_file}):\n{self.log_tail()}"
        )

    def start(self, timeout: float = 180) -> None:
        """Start Airflow unless ours already runs, and wait until all components are healthy."""
        self.spawn()
        self.wait_started(timeout)

    def spawn(self) -> None:
        """Start ``airflow standalone`` unless ours already runs, without waiting for it
        (:meth:`wait_started` does): its DB set-up and four components (~25 s idle, minutes
        under load) come up while the caller starts what else it needs (the test session's
        Kafka stack and Spark Connect server: nothing of Airflow's start waits on them)."""
        if self._pid() is not None:
            return
        if _port_open(self.port):
            raise AirflowError(f"port {self.port} is in use by something other than {self.home}")
        self.home.mkdir(parents=True, exist_ok=True)
        self.plugins_folder.mkdir(parents=True, exist_ok=True)
        self._link_dags_folders()
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(self.airflow_bin), "standalone"],
                env=self.env(),
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so stop() reaches every component
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")

    def wait_started(self, timeout: float = 180) -> None:
        """Until every component is healthy and the execution API answers; on failure nothing
        half-started is left behind.

        The first request to the execution API initialises it lazily and blocks the whole
        api-server meanwhile (seen: 20 s on a loaded machine, so the first task's calls and REST
        clients time out; over 60 s with a load average of 45 on 2 cores). It is paid here, as
        soon as the api-server answers, while the scheduler, dag-processor and triggerer are
        still starting (after all four were healthy, it came on top of their start)."""
        deadline = time.monotonic() + timeout
        self._wait_for(lambda: self.health() is not None, deadline, timeout)
        try:
            self._http.get(f"{self.base_url}/execution/health", timeout=max(deadline - time.monotonic(), 300))
        except requests.RequestException as exc:
            failure = self._start_failure(f"execution API did not answer: {exc}")
            self.stop()
            raise failure from exc
        self._wait_for(self.is_healthy, deadline, timeout)

    def _wait_for(self, ready: Callable[[], bool], deadline: float, timeout: float) -> None:
        """Until ``ready()``; stops Airflow and raises once standalone exited or past ``deadline``."""
        while not ready():
            failure = None
            if self._pid() is None:
                failure = self._start_failure("airflow standalone exited during start-up")
            elif time.monotonic() > deadline:
                failure = self._start_failure(f"Airflow not healthy after {timeout:.0f}s")
            if failure:
                self.stop()  # leave nothing half-started behind
                raise failure
            time.sleep(0.5)

    def stop(self, timeout: float = 30) -> None:
        """Stop the whole process group (standalone, its components and their task processes),
        and a scheduler :meth:`restart_scheduler` started (a process group of its own)."""
        scheduler = self._restarted_scheduler_pid()
        if scheduler is not None:
            _stop_group(scheduler, self._scheduler_proc, timeout)
        self.scheduler_pid_file.unlink(missing_ok=True)
        self._scheduler_proc = None
        pid = self._pid()
        if pid is not None:
            _stop_group(pid, self._proc, timeout)
        self.pid_file.unlink(missing_ok=True)
        self._proc = None
        self._token = None

    def restart_scheduler(self, timeout: float = 180) -> None:
        """Stop the scheduler and start a new one; the api-server, dag-processor and triggerer run on.

        The scheduler is the process that runs every task (its LocalExecutor's workers start the
        task processes), so whatever a task kept in memory is gone with it, as in a restart of
        all of Airflow: what a test finds kept across the restart came from a store. No run may
        be running: its task processes stop with the scheduler. A restart of the whole
        standalone took ~50 s on the loaded machine (DB check, four components, the execution
        API's lazy start), most of it not the scheduler's.

        Ready when the API's health shows a scheduler heartbeat other than the last one it
        showed once the old scheduler was gone (the same field from the same source: only the
        new scheduler can have written it).
        """
        old = self._scheduler_pid()
        if old is None:
            raise AirflowError(f"no scheduler of {self.home} runs: nothing to restart")
        if old == self._restarted_scheduler_pid():
            _stop_group(old, self._scheduler_proc, 30)
        else:
            _stop_process(old, 30)
        stale = self._last_heartbeat(timeout)
        with self.log_file.open("ab") as log:
            self._scheduler_proc = subprocess.Popen(
                [str(self.airflow_bin), "scheduler"],
                # its lines go straight to the log (wait_for_approval reads the scheduler's there)
                env={**self.env(), "PYTHONUNBUFFERED": "1"},
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # standalone's group is in another session; stop() stops both
            )
        self.scheduler_pid_file.write_text(f"{self._scheduler_proc.pid}\n")
        self._wait_for_new_scheduler(stale, timeout)

    def _wait_for_new_scheduler(self, stale: str | None, timeout: float) -> None:
        """Until the health shows a healthy scheduler with a heartbeat other than ``stale``."""
        deadline = time.monotonic() + timeout
        while True:
            health = self._scheduler_health()
            beat = health.get("latest_scheduler_heartbeat")
            if health.get("status") == "healthy" and beat is not None and beat != stale:
                return
            failure = None
            if self._restarted_scheduler_pid() is None:
                failure = self._start_failure("the restarted scheduler exited")
            elif time.monotonic() > deadline:
                failure = self._start_failure(f"no new scheduler heartbeat after {timeout:.0f}s")
            if failure:
                raise failure
            time.sleep(0.5)

    def _last_heartbeat(self, timeout: float) -> str | None:
        """The scheduler heartbeat the health shows now (None: no scheduler ever beat); waits for
        an answer: a missed one would let the old scheduler's heartbeat pass for a new one."""
        deadline = time.monotonic() + timeout
        while (health := self.health()) is None:
            if time.monotonic() > deadline:
                raise self._start_failure(f"the API's health did not answer for {timeout:.0f}s")
            time.sleep(0.5)
        return (health.get("scheduler") or {}).get("latest_scheduler_heartbeat")

    def _scheduler_health(self) -> dict:
        """The scheduler's part of the API's health (status, latest heartbeat); {} without an answer."""
        return (self.health() or {}).get("scheduler") or {}

    @property
    def scheduler_pid_file(self) -> Path:
        """Where the pid of a scheduler :meth:`restart_scheduler` started is kept."""
        return self.home / "scheduler.pid"

    def _restarted_scheduler_pid(self) -> int | None:
        """The scheduler restart_scheduler started, if it still runs in ``home``."""
        try:
            pid = int(self.scheduler_pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._scheduler_proc is not None and self._scheduler_proc.pid == pid:
            self._scheduler_proc.poll()  # reap it if it exited
        return pid if _alive(pid) and _cwd(pid) == self.home else None

    def _scheduler_pid(self) -> int | None:
        """The running scheduler: the one restart_scheduler started, else standalone's own."""
        restarted = self._restarted_scheduler_pid()
        standalone = self._pid()
        if restarted is not None or standalone is None:
            return restarted
        return next((c for c in _children(standalone) if _argv(c)[-1:] == ["scheduler"]), None)

    # ------------------------------------------------------------------ HTTP

    @property
    def password(self) -> str:
        """The admin password SimpleAuthManager generated into AIRFLOW_HOME."""
        path = self.home / "simple_auth_manager_passwords.json.generated"
        try:
            return json.loads(path.read_text())["admin"]
        except (FileNotFoundError, KeyError, ValueError) as exc:
            raise AirflowError(f"no admin password in {path}: {exc}") from exc

    def token(self) -> str:
        """A JWT for the admin user, from ``POST /auth/token``."""
        resp = self._http.post(
            f"{self.base_url}/auth/token",
            json={"username": "admin", "password": self.password},
            timeout=REQUEST_TIMEOUT,
        )
        _raise_for(resp)
        return resp.json()["access_token"]

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """Call the REST API as admin; log in again once if the token expired, and try again when
        the metadata DB was busy (see ``_db_busy``)."""
        for attempt in range(DB_BUSY_ATTEMPTS):
            resp = self._request_once(method, path, **kwargs)
            if not _db_busy(resp) or attempt == DB_BUSY_ATTEMPTS - 1:
                break
            time.sleep(1.0)
        _raise_for(resp)
        return resp

    def _request_once(self, method: str, path: str, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", REQUEST_TIMEOUT)
        extra_headers = kwargs.pop("headers", {})
        for attempt in (1, 2):
            if self._token is None:
                self._token = self.token()
            headers = {"Authorization": f"Bearer {self._token}", **extra_headers}
            resp = self._http.request(method, f"{self.base_url}{path}", headers=headers, **kwargs)
            if resp.status_code != 401 or attempt == 2:
                break
            self._token = None
        return resp

    def api(self, method: str, path: str, **kwargs) -> dict:
        """``request`` on ``/api/v2`` + path, returning the JSON body."""
        return self.request(method, f"/api/v2{path}", **kwargs).json()

    # ------------------------------------------------------------------ DAGs and runs

    def import_errors(self) -> list[dict]:
        """DAG files that failed to import: ``[{"filename", "stack_trace", ...}]``."""
        return self.api("GET", "/importErrors", params={"limit": 100})["import_errors"]

    def dag(self, dag_id: str) -> dict | None:
        """The DAG as the API lists it, or None until the dag-processor has parsed it."""
        try:
            return self.api("GET", f"/dags/{_q(dag_id)}")
        except AirflowError as exc:
            if exc.status == 404:
                return None
            raise

    def wait_for_dag(self, dag_id: str, timeout: float = 60) -> dict:
        """Wait until ``dag_id`` is parsed and listed; on timeout show the import errors."""
        deadline = time.monotonic() + timeout
        while (dag := self.dag(dag_id)) is None:
            if time.monotonic() > deadline:
                errors = "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in self.import_errors())
                raise AirflowError(
                    f"DAG {dag_id} not listed after {timeout:.0f}s; import errors:\n{errors or '(none)'}"
                )
            time.sleep(1)
        return dag

    def unpause(self, dag_id: str) -> None:
        self.api(
            "PATCH", f"/dags/{_q(dag_id)}", params={"update_mask": "is_paused"}, json={"is_paused": False}
        )

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        """Unpause ``dag_id`` and start a manual run with ``conf``; return its run_id."""
        self.unpause(dag_id)
        body = {"logical_date": None, "conf": conf or {}}
        run = self.api("POST", f"/dags/{_q(dag_id)}/dagRuns", json=body)
        return run["dag_run_id"]

    @staticmethod
    def _run_path(dag_id: str, run_id: str) -> str:
        return f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}"

    def _ti_path(self, dag_id: str, run_id: str, task_id: str) -> str:
        return f"{self._run_path(dag_id, run_id)}/taskInstances/{_q(task_id)}"

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self.api("GET", self._run_path(dag_id, run_id))

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float = 300,
        states: Iterable[str] = ("success", "failed"),
    ) -> str:
        """Wait until the run is in one of ``states``; return that state."""
        states = tuple(states)
        deadline = time.monotonic() + timeout
        while (state := self.dag_run(dag_id, run_id)["state"]) not in states:
            if time.monotonic() > deadline:
                raise AirflowError(
                    f"run {dag_id}/{run_id} is {state!r}, not in {states}, after {timeout:.0f}s; "
                    f"tasks: {self._ti_states(dag_id, run_id)}"
                )
            time.sleep(STATE_POLL_S)
        return state

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        path = f"{self._run_path(dag_id, run_id)}/taskInstances"
        return self.api("GET", path, params={"limit": 1000})["task_instances"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict:
        path = self._ti_path(dag_id, run_id, task_id)
        return self.api("GET", path if map_index < 0 else f"{path}/{map_index}")

    def _ti_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {ti["task_id"]: ti["state"] for ti in self.task_instances(dag_id, run_id)}

    def wait_for_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str, timeout: float = 120, map_index: int = -1
    ) -> dict:
        """Wait until the task is in ``state``; fail at once if it ends in another final state.

        A mapped task instance does not exist (404) until its upstream has expanded it: that is
        waited for too, until the deadline.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                ti = self.task_instance(dag_id, run_id, task_id, map_index)
            except AirflowError as exc:
                if exc.status != 404 or map_index < 0 or time.monotonic() > deadline:
                    raise
                time.sleep(STATE_POLL_S)
                continue
            if ti["state"] == state:
                return ti
            if ti["state"] in TERMINAL_TI_STATES or time.monotonic() > deadline:
                raise AirflowError(
                    f"task {dag_id}/{run_id}/{task_id} is {ti['state']!r}, waiting for {state!r}; "
                    f"tasks: {self._ti_states(dag_id, run_id)}"
                )
            time.sleep(STATE_POLL_S)

    # ------------------------------------------------------------------ approvals

    def wait_for_approval(
        self, dag_id: str, run_id: str, task_id: str, timeout: float = 120, map_index: int = -1
    ) -> dict:
        """Wait until the gate waits for an answer and it is safe to answer; return its request.

        ``awaiting_input`` alone is not enough in Airflow 3.3.2: the worker that parked the
        task reports "success" to the scheduler a little later, and if the answer has already
        re-queued the task by then, the scheduler takes that stale report for an external state
        change and fails the gate (apache/airflow#67287, the same race on the defer path). So
        also wait until the scheduler has logged that report for this task instance.
        """
        deadline = time.monotonic() + timeout
        ti = self.wait_for_task_state(dag_id, run_id, task_id, "awaiting_input", timeout, map_index)
        seen = re.compile(
            rb"TaskInstance Finished: [^\n]*ti_id=" + re.escape(ti["id"].encode()) + rb",[^\n]*"
            rb"state=awaiting_input,"
        )
        while not seen.search(self.log_file.read_bytes()):
            if time.monotonic() > deadline:
                raise AirflowError(
                    f"scheduler has not processed the parked gate {task_id} of {dag_id}/{run_id} "
                    f"after {timeout:.0f}s (looked for 'TaskInstance Finished' in {self.log_file})"
                )
            time.sleep(0.5)
        return self.api("GET", f"{self._ti_path(dag_id, run_id, task_id)}/{map_index}/hitlDetails")

    def pending_approvals(self, dag_id: str | None = None) -> list[dict]:
        """Human-in-the-loop requests still waiting for an answer (each has ``task_instance``)."""
        path = f"/dags/{_q(dag_id) if dag_id else '~'}/dagRuns/~/hitlDetails"
        return self.api("GET", path, params={"response_received": "false", "limit": 1000})["hitl_details"]

    def answer(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        chosen_options: list[str],
        params_input: dict | None = None,
        map_index: int = -1,
    ) -> dict:
        """Answer a waiting approval gate, e.g. ``chosen_options=[APPROVE_OPTION]`` (kafka_runbooks.approval)."""
        path = f"{self._ti_path(dag_id, run_id, task_id)}/{map_index}/hitlDetails"
        return self.api(
            "PATCH", path, json={"chosen_options": chosen_options, "params_input": params_input or {}}
        )

    # ------------------------------------------------------------------ logs

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1
    ) -> list[dict]:
        """The task's structured log records (``event``, ``level``, ``timestamp`` and extra keys)."""
        body = self.api(
            "GET",
            f"{self._ti_path(dag_id, run_id, task_id)}/logs/{try_number}",
            params={"map_index": map_index, "full_content": "true"},
            headers={"Accept": "application/json"},
        )
        # {"content": [records], "continuation_token": ...}; the first records name the log's
        # source ({"event": "::group::Log message source details"}, its path, "::endgroup::")
        return [rec if isinstance(rec, dict) else {"event": str(rec)} for rec in body["content"]]

    def task_log_text(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1
    ) -> str:
        """The task log as plain lines, ``timestamp [level] logger: event key=value``, for humans."""
        lines = []
        for rec in self.task_log(dag_id, run_id, task_id, try_number, map_index):
            rec = dict(rec)
            head = " ".join(
                str(part)
                for part in (
                    rec.pop("timestamp", None),
                    f"[{rec.pop('level')}]" if "level" in rec else None,
                    f"{rec.pop('logger')}:" if "logger" in rec else None,
                    rec.pop("event", None),
                )
                if part is not None
            )
            extras = (f"{k}={v}" for k, v in rec.items() if k not in LOG_CONTEXT_KEYS)
            lines.append(" ".join([head, *extras]))
        return "\n".join(lines)


DB_BUSY_ATTEMPTS = 4


def _db_busy(resp: requests.Response) -> bool:
    """A 500 from the API server whose metadata DB was locked (SQLite waits 5 s for a lock, then
    the request's transaction is rolled back and the API answers "Database error"): nothing was
    written, so the same request may be sent again. Seen on a loaded 2-core machine."""
    return resp.status_code == 500 and any(m in resp.text for m in ("Database error", "database is locked"))


def _raise_for(resp: requests.Response) -> None:
    if resp.status_code >= 400:
        raise AirflowError(
            f"{resp.request.method} {resp.url} -> HTTP {resp.status_code}: {resp.text}", resp.status_code
        )


def _q(segment: str) -> str:
    """Quote one URL path segment: run ids carry '+' and ':'."""
    return quote(segment, safe="")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _stop_group(pgid: int, proc: subprocess.Popen | None, timeout: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after ``timeout``; wait until it is gone."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while group_alive(pgid, proc) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_alive(pgid, proc):
        _signal_group(pgid, signal.SIGKILL)
        while group_alive(pgid, proc) and time.monotonic() < deadline + 10:
            time.sleep(0.2)


def _stop_process(pid: int, timeout: float) -> None:
    """SIGTERM one process (standalone's scheduler: it stops its executor's workers and its log
    server), SIGKILL what is left of it and its children after ``timeout``; wait until all are gone."""
    family = [pid, *_children(pid)]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.2)
    for p in [p for p in family if _alive(p)]:
        os.kill(p, signal.SIGKILL)
    while any(_alive(p) for p in family) and time.monotonic() < deadline + 10:
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    """Running, not a zombie: an exited child that its parent has not reaped counts as gone
    (standalone never reaps a component that exited)."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if len(fields) > 1 and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _cwd(pid: int) -> Path | None:
    try:
        return Path(f"/proc/{pid}/cwd").resolve(strict=True)
    except OSError:
        return None
