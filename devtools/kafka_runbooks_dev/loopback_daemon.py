"""One local daemon on loopback (Debian's Prometheus, its Alertmanager): started from a command
line with its log in its own folder, ready when its ``/-/ready`` endpoint answers, stopped by
SIGTERM (SIGKILL after 10 s). Each daemon says its command line; the lifecycle is said once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import requests


class LoopbackDaemon:
    """Subclasses set ``name`` and give :meth:`command`; ``home``, ``port`` and ``url`` are theirs."""

    name = "daemon"
    home: Path
    url: str

    def command(self) -> list[str]:
        """Its files written, the command line that runs it."""
        raise NotImplementedError

    def __enter__(self):
        args = self.command()
        log = open(self.home / f"{self.name}.log", "wb")  # noqa: SIM115 - the process writes it until stopped
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready(60)
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Until its readiness endpoint answers (or it exited: its log says why)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = (self.home / f"{self.name}.log").read_text()[-2000:]
                raise RuntimeError(f"{self.name} exited: {tail}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s")

    def __exit__(self, *exc) -> None:
        """Stop it."""
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
