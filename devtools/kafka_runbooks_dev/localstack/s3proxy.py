"""A real S3-compatible object store for the local stack: S3Proxy from Maven Central jars.

S3Proxy (``org.gaul:s3proxy``) speaks the S3 API over a jclouds back end; here the
``filesystem`` back end, so objects are plain files under ``<home>/data`` that a test can
look at, or ``transient`` (in memory). It runs as a plain ``java`` process like the
Kafka nodes, its jars fetched once by Maven into ``.stack/s3proxy-lib``.

Port: ``KR_S3PROXY_PORT``, else the Kafka stack's port base + 70 (19070 by default).
Credentials: a fixed local identity (``kafka-runbooks`` / ``kafka-runbooks-secret``),
for this machine's loopback only.

Version 4.1.0 honours ``If-None-Match: *`` and ``If-Match: <ETag>`` on PutObject (checked
here: a second create and a swap from a stale ETag are refused with 412), so the per-cluster
lease and the runs' fences hold on it as on Amazon S3. 2.6.0 ignored both (gaul/s3proxy#627);
:class:`kafka_runbooks.storage.Store` probes a store once and refuses one that ignores them.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kafka_runbooks_dev.localstack.stack import PROJECT_ROOT, STACK_ASSETS, StackError, fetch_with_maven

log = logging.getLogger(__name__)

POM = STACK_ASSETS / "s3proxy" / "pom.xml"
LOGBACK = STACK_ASSETS / "s3proxy" / "logback.xml"
DEFAULT_LIB = PROJECT_ROOT / ".stack" / "s3proxy-lib"
DEFAULT_HOME = PROJECT_ROOT / ".stack" / "s3proxy"
MAIN_CLASS = "org.gaul.s3proxy.Main"
IDENTITY = "kafka-runbooks"
CREDENTIAL = "kafka-runbooks-secret"
BUCKET = "kafka-runbooks"
PORT_OFFSET = 70  # from the Kafka stack's port base (its own ports start at +80)


def default_port() -> int:
    if os.environ.get("KR_S3PROXY_PORT"):
        return int(os.environ["KR_S3PROXY_PORT"])
    return int(os.environ.get("KR_STACK_PORT_BASE", "19000")) + PORT_OFFSET


def ensure_jars(lib_dir: Path = DEFAULT_LIB) -> Path:
    """Copy S3Proxy and its dependencies from Maven Central into ``lib_dir`` once."""
    return fetch_with_maven(POM, lib_dir, "S3Proxy")


class S3Proxy:
    """One S3Proxy process: its config, data, log and pid file under ``home``."""

    def __init__(
        self,
        home: Path = DEFAULT_HOME,
        port: int | None = None,
        *,
        backend: str = "filesystem",
        lib_dir: Path = DEFAULT_LIB,
        bucket: str = BUCKET,
    ) -> None:
        if backend not in ("filesystem", "transient"):
            raise ValueError(f"backend must be filesystem or transient, not {backend!r}")
        self.home = Path(home).resolve()
        self.port = port or default_port()
        self.backend = backend
        self.lib_dir = lib_dir
        self.bucket = bucket

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        """Where the filesystem back end keeps objects: ``<data_dir>/<bucket>/<key>``."""
        return self.home / "data"

    @property
    def pid_file(self) -> Path:
        return self.home / "s3proxy.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "s3proxy.log"

    def url(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def storage_options(self) -> dict[str, Any]:
        """fsspec (s3fs) options reaching this server."""
        return {
            "key": IDENTITY,
            "secret": CREDENTIAL,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
        }

    def env(self, prefix: str = "") -> dict[str, str]:
        """The settings a worker needs to keep its data here (tests and the demo)."""
        import json

        return {
            "KAFKA_RUNBOOKS_DATA_URL": self.url(prefix),
            "KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS": json.dumps(
                {"client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}}
            ),
            "AWS_ACCESS_KEY_ID": IDENTITY,
            "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
        }

    # ------------------------------------------------------------ running it

    def pid(self) -> int | None:
        """The pid when the process is alive and is this S3Proxy (its marker on the command line)."""
        try:
            pid = int(self.pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            return None
        return pid if f"-Dkr.s3proxy.home={self.home}" in cmdline else None

    def spawn(self) -> subprocess.Popen | None:
        """Start the JVM unless it runs, without waiting for it to answer (:meth:`start`, which
        finds it running, waits): the caller starts what else it needs meanwhile. The process
        started, or None."""
        proc = None
        if self.pid() is None:
            ensure_jars(self.lib_dir)
            self.data_dir.mkdir(parents=True, exist_ok=True)
            conf = self.home / "s3proxy.conf"
            conf.write_text(
                "\n".join(
                    [
                        f"s3proxy.endpoint=http://127.0.0.1:{self.port}",
                        "s3proxy.authorization=aws-v2-or-v4",
                        f"s3proxy.identity={IDENTITY}",
                        f"s3proxy.credential={CREDENTIAL}",
                        f"jclouds.provider={self.backend}",
                        f"jclouds.filesystem.basedir={self.data_dir}",
                        "",
                    ]
                )
            )
            argv = [
                "java",
                "-Xmx256m",
                f"-Dkr.s3proxy.home={self.home}",
                f"-Dlogback.configurationFile={LOGBACK}",
                "-cp",
                f"{self.lib_dir}/*",
                MAIN_CLASS,
                "--properties",
                str(conf),
            ]
            with open(self.log_file, "ab") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            self.pid_file.write_text(str(proc.pid))
        return proc

    def start(self, timeout_s: float = 300.0) -> S3Proxy:
        """Start (or find running) and wait until it answers S3 requests; create the bucket.

        A start that fails or times out stops the process it started."""
        proc = self.spawn()
        try:
            self._wait_ready(timeout_s, proc)
            self._ensure_bucket()
        except BaseException:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
            raise
        return self

    def _wait_ready(self, timeout_s: float, proc: subprocess.Popen | None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # the process we just started (its command line may not show the marker until
            # exec), or the one found running
            alive = proc.poll() is None if proc is not None else self.pid() is not None
            if not alive:
                raise StackError(f"S3Proxy exited while starting; see {self.log_file}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise StackError(
            f"S3Proxy did not listen on {self.port} within {timeout_s:.0f}s; see {self.log_file}"
        )

    def _ensure_bucket(self) -> None:
        from kafka_runbooks.storage import Store, storage_options

        s3 = Store(self.url(), options={**storage_options("s3://x"), **self.storage_options()})
        deadline = time.monotonic() + 120
        while True:
            try:
                s3.fs.call_s3("create_bucket", Bucket=self.bucket)
                return
            except OSError as exc:
                code = ((getattr(exc.__cause__, "response", None) or {}).get("Error") or {}).get("Code")
                if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop it (SIGTERM, then SIGKILL); False if it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.2)
        if self.pid() is not None:
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kr-s3proxy", description="the local S3-compatible store (S3Proxy)")
    parser.add_argument("command", choices=["start", "stop", "status", "env"])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("KR_S3PROXY_HOME", DEFAULT_HOME)))
    parser.add_argument(
        "--port", type=int, default=None, help="default KR_S3PROXY_PORT or the stack's port base + 70"
    )
    parser.add_argument("--backend", choices=["filesystem", "transient"], default="filesystem")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    proxy = S3Proxy(args.home, args.port, backend=args.backend)
    if args.command == "start":
        proxy.start()
        print(f"S3Proxy: {proxy.endpoint}  bucket: {proxy.bucket}  data: {proxy.data_dir}")
    elif args.command == "stop":
        print("stopped" if proxy.stop() else "not running")
    elif args.command == "status":
        pid = proxy.pid()
        print(f"running (pid {pid}) on {proxy.endpoint}" if pid else "not running")
        return 0 if pid else 1
    else:
        for key, value in proxy.env().items():
            print(f"export {key}='{value}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
