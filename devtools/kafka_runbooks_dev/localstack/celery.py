"""A real distributed Airflow on loopback: PostgreSQL, Redis, and Airflow's CeleryExecutor
with several Celery workers, each with its own local folders.

Airflow refuses the Celery executor on SQLite, so the metadata DB is a private PostgreSQL
(Debian's ``postgresql`` package: its own ``initdb`` and ``pg_ctl``, run as the ``postgres``
user when we are root) and the Celery broker a private ``redis-server`` without persistence.
Airflow's components (api-server, scheduler, dag-processor, triggerer) and each worker
(``airflow celery worker``) run as separate processes, each in its own process group, so a
worker can be SIGKILLed alone and started again.

Each worker has its own ``KAFKA_RUNBOOKS_DATA_DIR``, Airflow log folder, log-server port and
task-instance hostname (``hostname_callable`` reads ``KR_AIRFLOW_HOSTNAME``; the hostnames
are loopback addresses 127.0.0.2, 127.0.0.3, ... so the api-server can reach them). Pass the
object store's settings (e.g. ``S3Proxy(...).env()``) in ``extra_env``: then no worker shares
a disk with another.

Like :mod:`.airflow`, this module never imports Airflow: it drives it from outside.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev.localstack.airflow import AirflowError, AirflowLocal, _port_open, _signal_group
from kafka_runbooks_dev.processes import group_alive

# one port base for the whole Celery test (docs/testing.md); off the other tests' 28080 and 29000+
DEFAULT_PORT_BASE = 28200
PG_OFFSET, REDIS_OFFSET, S3PROXY_OFFSET, API_OFFSET = 0, 1, 2, 10
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HOSTNAME_ENV = "KR_AIRFLOW_HOSTNAME"


def port_base() -> int:
    return int(os.environ.get("KR_CELERY_PORT_BASE", DEFAULT_PORT_BASE))


def hostname() -> str:
    """Airflow's ``[core] hostname_callable`` for the local fleet: a worker's own name."""
    return os.environ.get(HOSTNAME_ENV) or socket.getfqdn()


class ServiceError(RuntimeError):
    """A local service (PostgreSQL, Redis, a Celery worker) did not start or stop."""


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its binaries as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no {path})"


def _wait(condition, timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ServiceError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stop_group(pgid: int, timeout: float, sig: signal.Signals = signal.SIGTERM) -> None:
    """Signal a process group, wait for it to go; SIGKILL what is left after ``timeout``."""
    _stop_groups([pgid], timeout, sig)


def _stop_groups(pgids: list[int], timeout: float, sig: signal.Signals = signal.SIGTERM) -> None:
    """Signal every group first, then wait for all: their shutdowns overlap instead of adding up."""
    for pgid in pgids:
        _signal_group(pgid, sig)
    deadline = time.monotonic() + timeout
    while any(group_alive(p) for p in pgids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pgid in [p for p in pgids if group_alive(p)]:
        _signal_group(pgid, signal.SIGKILL)
        _wait(lambda pgid=pgid: not group_alive(pgid), 30, f"process group {pgid} gone after SIGKILL")


# ---------------------------------------------------------------------------- PostgreSQL


class LocalPostgres:
    """A private PostgreSQL cluster in ``<home>/data`` on 127.0.0.1:``port``, trust auth,
    superuser ``airflow`` and database ``airflow``; fsync off (a test database)."""

    def __init__(self, home: Path, port: int | None = None, user: str = "airflow") -> None:
        self.home = Path(home).resolve()
        self.port = port or port_base() + PG_OFFSET
        self.user = user
        self.data_dir = self.home / "data"
        self.log_file = self.home / "postgres.log"
        self.bin_dir = self.find_bin_dir()

    @staticmethod
    def find_bin_dir() -> Path:
        """The newest ``/usr/lib/postgresql/<version>/bin`` (Debian's layout) with pg_ctl."""
        found = sorted(
            Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name)
        )
        if not found:
            raise ServiceError(
                "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: "
                "apt-get install postgresql (scripts/bootstrap.sh --browser does)"
            )
        return found[-1].parent

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``airflow`` database (psycopg2, as Airflow's docs use)."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/airflow"

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            _as_postgres([str(self.bin_dir / argv[0]), *argv[1:]]),
            capture_output=True,
            text=True,
            cwd="/",  # runuser keeps the cwd, which the postgres user may not be allowed into
        )
        return proc

    def pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if str(self.data_dir) in _cmdline(pid) else None

    def start(self, timeout: float = 120) -> LocalPostgres:
        if self.pid() is not None:
            return self
        if _port_open(self.port):
            raise ServiceError(f"port {self.port} is in use: not our PostgreSQL in {self.home}")
        self.home.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.home, "postgres")
        if not (self.data_dir / "PG_VERSION").exists():
            init = self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
            )
            if init.returncode:
                raise ServiceError(f"initdb failed:\n{init.stdout}{init.stderr}")
        options = (
            f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        started = self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-o", options,
            "-w", "-t", str(int(timeout)), "start",
        )  # fmt: skip
        if started.returncode:
            raise ServiceError(
                f"pg_ctl start failed:\n{started.stdout}{started.stderr}\n{_tail(self.log_file)}"
            )
        exists = self._psql("SELECT 1 FROM pg_database WHERE datname = 'airflow'")
        if exists.stdout.strip() != "1":
            made = self._psql("CREATE DATABASE airflow")
            if made.returncode:
                raise ServiceError(f"could not create database airflow: {made.stderr}")
        return self

    def _psql(self, sql: str) -> subprocess.CompletedProcess:
        argv = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres"]
        return self._run(*argv, "-tAc", sql)

    def stop(self, timeout: float = 60) -> bool:
        """Stop it (fast shutdown, then immediate); False if it was not running."""
        if self.pid() is None:
            return False
        for mode in ("fast", "immediate"):
            done = self._run(
                "pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "-t", str(int(timeout)), "stop"
            )
            if done.returncode == 0 or self.pid() is None:
                return True
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        return True


# ---------------------------------------------------------------------------- Redis


class LocalRedis:
    """A private ``redis-server`` on 127.0.0.1:``port`` with no persistence (the Celery broker)."""

    def __init__(self, home: Path, port: int | None = None) -> None:
        self.home = Path(home).resolve()
        self.port = port or port_base() + REDIS_OFFSET
        self.pid_file = self.home / "redis.pid"
        self.log_file = self.home / "redis.log"
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        if self._proc is not None and self._proc.pid == pid and self._proc.poll() is not None:
            return None
        return pid if "redis-server" in _cmdline(pid) and f":{self.port}" in _cmdline(pid) else None

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self, timeout: float = 60) -> LocalRedis:
        if self.pid() is None:
            binary = shutil.which("redis-server")
            if binary is None:
                raise ServiceError("redis-server is not on PATH: apt-get install redis-server")
            if _port_open(self.port):
                raise ServiceError(f"port {self.port} is in use: not our Redis in {self.home}")
            self.home.mkdir(parents=True, exist_ok=True)
            argv = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                    "--appendonly", "no", "--dir", str(self.home), "--daemonize", "no"]  # fmt: skip
            with self.log_file.open("ab") as log:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.pid_file.write_text(str(self._proc.pid))
        try:
            _wait(self.ping, timeout, f"Redis answering PING on {self.port} (log {self.log_file})")
        except ServiceError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        _stop_group(pid, timeout)
        if self._proc is not None:
            self._proc.wait(10)
            self._proc = None
        self.pid_file.unlink(missing_ok=True)
        return True


# ---------------------------------------------------------------------------- Airflow


@dataclass
class CeleryWorker:
    """One ``airflow celery worker``: its own folders, task hostname and log-server port."""

    name: str
    hostname: str  # what Airflow records as the task instance's hostname
    home: Path
    log_server_port: int

    @property
    def data_dir(self) -> Path:
        return self.home / "kafka_runbooks"

    @property
    def log_folder(self) -> Path:
        return self.home / "logs"

    @property
    def process_log(self) -> Path:
        return self.home / "worker.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "worker.pid"


class AirflowCelery(AirflowLocal):
    """Airflow with the CeleryExecutor: its components and ``workers`` as separate processes.

    The REST client (trigger, wait_for_run, answer, task_log, ...) is :class:`AirflowLocal`'s.
    ``sql_alchemy_conn``: a PostgreSQL URL (:attr:`LocalPostgres.url`); ``broker_url``: Redis
    (:attr:`LocalRedis.url`). ``workers``: their names; worker *i* records hostname
    ``127.0.0.<i+2>``. Its log server listens on ``port + 1`` for the first worker, the port
    the api-server asks every host for, and on ``port + 3 + i`` for the others: two workers
    on one machine cannot share that port, so the API shows only the first worker's task logs;
    :meth:`worker_task_log` reads any worker's own log folder.
    """

    def __init__(
        self,
        home: Path,
        *,
        sql_alchemy_conn: str,
        broker_url: str,
        workers: tuple[str, ...] = ("a", "b"),
        worker_concurrency: int = 2,
        **kwargs,
    ) -> None:
        super().__init__(home, **kwargs)
        self.sql_alchemy_conn = sql_alchemy_conn
        self.broker_url = broker_url
        self.worker_concurrency = worker_concurrency
        self.workers = {
            name: CeleryWorker(
                name=name,
                hostname=f"127.0.0.{i + 2}",
                home=self.home / "workers" / name,
                log_server_port=self.port + 1 if i == 0 else self.port + 3 + i,
            )
            for i, name in enumerate(workers)
        }
        # the scheduler's log: wait_for_approval looks there for "TaskInstance Finished"
        self.log_file = self.component_log("scheduler")
        self._procs: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------------ environment

    def _secrets(self) -> dict[str, str]:
        """One JWT secret and API secret key for every component (they must agree), kept in home."""
        path = self.home / "secrets.json"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"jwt": secrets.token_urlsafe(32), "api": secrets.token_urlsafe(32)}))
        return json.loads(path.read_text())

    def env(self) -> dict[str, str]:
        env = super().env()
        keys = self._secrets()
        env.update(
            {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.sql_alchemy_conn,
                "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.sql_alchemy_conn.replace("+psycopg2", ""),
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
                "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
                "AIRFLOW__API__SECRET_KEY": keys["api"],
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.hostname",
                # the components' own data folder; workers get theirs in worker_env
                "KAFKA_RUNBOOKS_DATA_DIR": str(self.home / "kafka_runbooks"),
            }
        )
        for key in list(self.extra_env):  # extra_env wins, as in AirflowLocal
            env[key] = self.extra_env[key]
        return env

    def worker_env(self, name: str) -> dict[str, str]:
        worker = self.workers[name]
        env = self.env()
        env.update(
            {
                "KAFKA_RUNBOOKS_DATA_DIR": str(worker.data_dir),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(worker.log_folder),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker.log_server_port),
                HOSTNAME_ENV: worker.hostname,
            }
        )
        return env

    # ------------------------------------------------------------------ processes

    def component_log(self, name: str) -> Path:
        return self.home / "logs-components" / f"{name}.log"

    def _pid_file(self, name: str) -> Path:
        return self.home / "pids" / f"{name}.pid"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], log: Path, pid_file: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(self.airflow_bin), *argv],
                env=env,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killable alone, with its children
            )
        self._procs[name] = proc
        pid_file.write_text(f"{proc.pid}\n")

    def _live_pid(self, name: str, pid_file: Path) -> int | None:
        """The pid in ``pid_file`` if it is a live process of ours running in ``home``."""
        try:
            pid = int(pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        proc = self._procs.get(name)
        if proc is not None and proc.pid == pid and proc.poll() is not None:
            return None
        try:
            return pid if Path(f"/proc/{pid}/cwd").resolve(strict=True) == self.home else None
        except OSError:
            return None

    def _pid(self) -> int | None:
        """The api-server's pid (AirflowLocal's notion of "running")."""
        return self._live_pid("api-server", self._pid_file("api-server"))

    def log_tail(self, lines: int = 60, component: str | None = None) -> str:
        names = [component] if component else list(COMPONENTS)
        return "\n".join(f"--- {n}:\n{_tail(self.component_log(n), lines)}" for n in names)

    def _start_failure(self, what: str) -> AirflowError:
        return AirflowError(f"{what}; health: {self.health()}\n{self.log_tail(25)}")

    def migrate(self) -> None:
        """``airflow db migrate`` on the PostgreSQL database (idempotent)."""
        log = self.component_log("db-migrate")
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            done = subprocess.run(
                [str(self.airflow_bin), "db", "migrate"],
                env=self.env(),
                cwd=self.home,
                stdout=out,
                stderr=out,
            )
        if done.returncode:
            raise AirflowError(f"airflow db migrate failed:\n{_tail(log)}")

    def start(self, timeout: float = 300, workers: tuple[str, ...] | None = None) -> None:
        """Migrate, start the components and ``workers`` (default: every worker); wait until
        Airflow is healthy and those workers are ready.

        The workers are spawned right after the components, not once Airflow is healthy: a
        worker needs only the metadata DB and Redis to come up, and its start (~16 s of imports
        on a loaded machine) then overlaps the api-server's. A test that wants a worker only
        later names the others alone: a start it never needed is not paid for."""
        deadline = time.monotonic() + timeout
        self.home.mkdir(parents=True, exist_ok=True)
        self.plugins_folder.mkdir(parents=True, exist_ok=True)
        try:
            if self._pid() is None:
                if _port_open(self.port):
                    raise AirflowError(f"port {self.port} is in use by something other than {self.home}")
                self._link_dags_folders()
                self.migrate()
            for name in COMPONENTS:
                if self._live_pid(name, self._pid_file(name)) is None:
                    argv = [name] if name != "api-server" else [name, "--port", str(self.port)]
                    self._spawn(name, argv, self.env(), self.component_log(name), self._pid_file(name))
            names = tuple(self.workers) if workers is None else workers
            for name in names:
                self._spawn_worker(name)
            self._wait_healthy(deadline, timeout)
            for name in names:
                self._wait_worker_ready(name, max(deadline - time.monotonic(), 60))
        except BaseException:
            self.stop()  # leave nothing half-started behind
            raise

    def _wait_healthy(self, deadline: float, timeout: float) -> None:
        """Until every component runs and the api-server answers, its execution API included."""
        while not self.is_healthy():
            dead = [n for n in COMPONENTS if self._live_pid(n, self._pid_file(n)) is None]
            if dead:
                raise self._start_failure(f"{', '.join(dead)} exited during start-up")
            if time.monotonic() > deadline:
                raise self._start_failure(f"Airflow not healthy after {timeout:.0f}s")
            time.sleep(1)
        # the execution API initialises lazily and blocks the api-server meanwhile (see AirflowLocal)
        self._http.get(f"{self.base_url}/execution/health", timeout=max(deadline - time.monotonic(), 300))

    def worker_pid(self, name: str) -> int | None:
        worker = self.workers[name]
        return self._live_pid(f"worker-{name}", worker.pid_file)

    def worker_ready(self, name: str) -> bool:
        """Celery printed "ready" in this worker's log since its last start."""
        worker = self.workers[name]
        text = worker.process_log.read_text(errors="replace") if worker.process_log.exists() else ""
        return " ready." in text.rsplit("=== start ===", 1)[-1]

    def start_worker(self, name: str, timeout: float = 180) -> CeleryWorker:
        """Start one worker (unless it runs) and wait until Celery says it is ready."""
        self._spawn_worker(name)
        return self._wait_worker_ready(name, timeout)

    def _spawn_worker(self, name: str) -> None:
        """Start the worker's process unless it runs; do not wait for it.

        Without mingle and gossip: Airflow uses neither (a worker gets its tasks from the queue
        alone), and mingle's search for neighbours took a second of every start."""
        worker = self.workers[name]
        if self.worker_pid(name) is not None:
            return
        for folder in (worker.data_dir, worker.log_folder):
            folder.mkdir(parents=True, exist_ok=True)
        with worker.process_log.open("a") as out:
            out.write("=== start ===\n")
        argv = ["celery", "worker", "--celery-hostname", f"{name}@%h", "--concurrency",
                str(self.worker_concurrency), "--without-mingle", "--without-gossip"]  # fmt: skip
        self._spawn(f"worker-{name}", argv, self.worker_env(name), worker.process_log, worker.pid_file)

    def _wait_worker_ready(self, name: str, timeout: float) -> CeleryWorker:
        worker = self.workers[name]
        deadline = time.monotonic() + timeout
        while not self.worker_ready(name):
            if self.worker_pid(name) is None:
                raise AirflowError(
                    f"Celery worker {name} exited while starting:\n{_tail(worker.process_log)}"
                )
            if time.monotonic() > deadline:
                raise AirflowError(
                    f"Celery worker {name} not ready after {timeout:.0f}s:\n{_tail(worker.process_log)}"
                )
            time.sleep(0.5)
        return worker

    def kill_worker(self, name: str) -> None:
        """SIGKILL one worker's whole process group (Celery, its pool, its running tasks)."""
        pid = self.worker_pid(name)
        if pid is not None:
            _stop_group(pid, 0, signal.SIGKILL)
            self._reap(f"worker-{name}")

    def stop_worker(self, name: str, timeout: float = 120) -> None:
        """Warm shutdown (SIGTERM): the worker finishes its running tasks and hands back the
        ones it had reserved; SIGKILL after ``timeout``."""
        pid = self.worker_pid(name)
        if pid is not None:
            _stop_group(pid, timeout)
            self._reap(f"worker-{name}")

    def _reap(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.wait(10)

    def stop(self, timeout: float = 30) -> None:
        """Stop every worker and every component (SIGTERM, SIGKILL what outlives ``timeout``).

        All are signalled at once and then waited for: one after the other, each waiting for
        the last to go, the module's teardown took ~15 s of graceful shutdowns in a row."""
        names = [f"worker-{n}" for n in self.workers] + list(reversed(COMPONENTS))
        pid_files = {f"worker-{n}": w.pid_file for n, w in self.workers.items()}
        pid_files.update({n: self._pid_file(n) for n in COMPONENTS})
        pids = [pid for n in names if (pid := self._live_pid(n, pid_files[n])) is not None]
        _stop_groups(pids, timeout)
        for name in names:
            self._reap(name)
        for name in COMPONENTS:
            self._pid_file(name).unlink(missing_ok=True)
        self._token = None

    # ------------------------------------------------------------------ logs on the workers

    def worker_task_log(
        self, worker: str, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1
    ) -> list[dict]:
        """A task's structured log records read from ``worker``'s own log folder ([] if none)."""
        folder = (
            self.workers[worker].log_folder / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        )
        if map_index >= 0:
            folder = folder / f"map_index={map_index}"
        path = folder / f"attempt={try_number}.log"
        if not path.exists():
            return []
        records = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                records.append({"event": line})
        return records
