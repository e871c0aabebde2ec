"""AddRaftVoter and RemoveRaftVoter through Kafka's own tool, ``kafka-metadata-quorum``.

Neither Python client speaks these RPCs (kafka-python 3.0.12 knows their api keys only,
confluent-kafka 2.16 not at all), so the runbook runs the tool's main class,
``org.apache.kafka.tools.MetadataQuorumCommand``, from the Kafka jars the deployment names
(a ``libs`` folder of a Kafka distribution, or a folder of its jars). Nothing here depends on
the local stack.

``add-controller`` reads the new controller's identity from a properties file: ``node.id``,
its controller listeners, and the directory id in the ``meta.properties`` of its metadata log
dir. The runner writes that file itself, from what DescribeQuorum reported for the observer
(its id and directory id: never typed by a person) and the endpoint the operator gave, so the
worker needs no access to the new controller's disk. The same file carries the client settings
(the tool passes it to its Admin client too).

The tool's failures are mapped here, once: Kafka's exception name in its output decides the
error (:data:`KAFKA_ERRORS`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks.errors import BadInput, CallFailed, Unreachable

MAIN_CLASS = "org.apache.kafka.tools.MetadataQuorumCommand"
LIBS_ENV = "KAFKA_RUNBOOKS_KAFKA_LIBS"
LIBS_VARIABLE = "kafka_runbooks_kafka_libs"
# client settings the Java Admin client reads under the same name as librdkafka's
JAVA_CLIENT_KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "client.id")
JAVA_CLIENT_PREFIXES = ("ssl.",)


class QuorumToolError(CallFailed):
    """kafka-metadata-quorum answered with an error; ``kafka_error`` names Kafka's exception."""

    def __init__(self, message: str, kafka_error: str | None) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


class VoterAlreadyAdded(QuorumToolError):
    """DuplicateVoterException: the voter is in the voter set already (a re-run after the add)."""


class VoterNotFound(QuorumToolError):
    """VoterNotFoundException: no such voter (id and directory id) in the voter set."""


KAFKA_ERRORS: dict[str, type[QuorumToolError]] = {
    "DuplicateVoterException": VoterAlreadyAdded,
    "VoterNotFoundException": VoterNotFound,
}
_EXCEPTION = re.compile(r"org\.apache\.kafka\.common\.errors\.(\w+): ?(.*)")


@dataclass(frozen=True)
class ControllerEndpoint:
    """One listener of a controller, as AddRaftVoter carries it (``CONTROLLER://host:port``)."""

    listener: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> ControllerEndpoint:
        """Parse ``LISTENER://host:port``, a listener of the new controller as AddRaftVoter carries it;
        BadInput otherwise."""
        m = re.fullmatch(r"\s*([A-Za-z0-9_]+)://([^:\s]+):(\d{1,5})\s*", text or "")
        if not m or not 0 < int(m.group(3)) < 65536:
            raise BadInput(
                f"controller endpoint {text!r} is not LISTENER://host:port (e.g. CONTROLLER://ctl4:9093)"
            )
        return cls(m.group(1), m.group(2), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def kafka_error(output: str) -> tuple[str | None, str]:
    """Kafka's exception name and message in the tool's output (the innermost cause wins)."""
    found = _EXCEPTION.findall(output)
    if not found:
        return None, output.strip().splitlines()[-1] if output.strip() else "no output"
    name, message = found[-1]
    return name, message.strip()


def find_classpath(libs: str | os.PathLike[str]) -> str:
    """The jars of a Kafka distribution's ``libs`` (or its home: ``<home>/libs``)."""
    path = Path(libs)
    if (path / "libs").is_dir():
        path = path / "libs"
    jars = sorted(p for p in path.glob("*.jar") if not p.name.startswith("jmx_prometheus"))
    if not any(j.name.startswith("kafka-tools-") for j in jars):
        raise BadInput(f"no kafka-tools jar in {path}: set {LIBS_ENV} to a Kafka distribution's libs folder")
    return os.pathsep.join(str(j) for j in jars)


def require_tool(libs: str | os.PathLike[str], java: str = "java") -> str:
    """The tool's classpath, checked before the gate is shown: BadInput naming what is missing (the
    jars, or a Java runtime on the worker's PATH). Seen as a new user would: approved, then failed at
    once because the Variable was not set, and the page said only "task(s) failed: replace"."""
    import shutil

    classpath = find_classpath(libs)
    if shutil.which(java) is None:
        raise BadInput(f"no {java!r} on the worker's PATH: kafka-metadata-quorum needs a Java runtime")
    return classpath


# librdkafka's SASL login in the Java client's words (the connection's extras are librdkafka's keys)
JAVA_LOGIN_MODULES = {
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
}


def java_client_properties(config: dict[str, str]) -> dict[str, str]:
    """The connection's settings as the Java Admin client reads them: its own keys as they are, and
    librdkafka's that it names otherwise translated (a SCRAM or PLAIN login, ``sasl.username`` and
    ``sasl.password``, becomes ``sasl.jaas.config``; the CA file ``ssl.ca.location`` a PEM
    truststore): without them the tool could not log in to a SASL_SSL cluster whose connection
    works for every other request (issue #38)."""
    out = {
        k: str(v)
        for k, v in config.items()
        if k in JAVA_CLIENT_KEYS or any(k.startswith(p) for p in JAVA_CLIENT_PREFIXES)
    }
    mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").upper()
    if mechanism:
        out["sasl.mechanism"] = mechanism
    module = JAVA_LOGIN_MODULES.get(mechanism)
    if module and "sasl.jaas.config" not in config and config.get("sasl.username"):
        user, password = (str(config.get(k) or "") for k in ("sasl.username", "sasl.password"))
        if any(c in user + password for c in '"\\'):  # a JAAS value in a properties file cannot hold them
            raise BadInput(
                "sasl.username or sasl.password holds a quote or a backslash: set sasl.jaas.config"
            )
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    ca = out.pop("ssl.ca.location", None)
    if ca and "ssl.truststore.location" not in out:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca})
    return out


def _properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


class QuorumTool:
    """Runs ``kafka-metadata-quorum`` against a cluster; one JVM per call (~9 s here)."""

    def __init__(
        self,
        libs: str | os.PathLike[str],
        bootstrap_servers: str,
        client_config: dict[str, str] | None = None,
        java: str = "java",
        timeout_s: float = 120.0,
    ) -> None:
        self.classpath = find_classpath(libs)
        self.bootstrap_servers = bootstrap_servers
        self.client_props = java_client_properties(client_config or {})
        self.java = java
        self.timeout_s = timeout_s

    def add_controller(
        self, node_id: int, directory_id: str, cluster_id: str, endpoints: list[ControllerEndpoint]
    ) -> str:
        """AddRaftVoter for an observer: its identity written as the tool reads it (node.id,
        listeners, meta.properties of its metadata dir); the tool's answer line on success."""
        with tempfile.TemporaryDirectory(prefix="kr-add-controller-") as tmp:
            meta = Path(tmp) / "metadata"
            meta.mkdir()
            (meta / "meta.properties").write_text(
                _properties(
                    {
                        "version": "1",
                        "node.id": str(node_id),
                        "cluster.id": cluster_id,
                        "directory.id": directory_id,
                    }
                )
            )
            names = ",".join(dict.fromkeys(e.listener for e in endpoints))
            config = Path(tmp) / "add-controller.properties"
            config.write_text(
                _properties(
                    {
                        **self.client_props,
                        "node.id": str(node_id),
                        "process.roles": "controller",
                        "controller.listener.names": names,
                        "listeners": ",".join(str(e) for e in endpoints),
                        "advertised.listeners": ",".join(str(e) for e in endpoints),
                        "metadata.log.dir": str(meta),
                    }
                )
            )
            return self._run(["--command-config", str(config), "add-controller"], f"AddRaftVoter {node_id}")

    def remove_controller(self, node_id: int, directory_id: str) -> str:
        """RemoveRaftVoter of exactly this voter (id and directory id)."""
        args = [
            "remove-controller",
            "--controller-id",
            str(node_id),
            "--controller-directory-id",
            directory_id,
        ]
        with tempfile.TemporaryDirectory(prefix="kr-remove-controller-") as tmp:
            config = Path(tmp) / "client.properties"
            config.write_text(_properties(self.client_props))
            return self._run(["--command-config", str(config), *args], f"RemoveRaftVoter {node_id}")

    def _run(self, args: list[str], what: str) -> str:
        cmd = [
            self.java,
            "-cp",
            self.classpath,
            MAIN_CLASS,
            "--bootstrap-server",
            self.bootstrap_servers,
            *args,
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError as exc:
            raise BadInput(f"{what}: no Java runtime ({self.java!r}) to run kafka-metadata-quorum") from exc
        except subprocess.TimeoutExpired as exc:
            raise Unreachable(
                f"{what}: kafka-metadata-quorum did not finish within {self.timeout_s:.0f} s"
            ) from exc
        if proc.returncode == 0:
            return proc.stdout.strip()
        name, message = kafka_error(proc.stdout + "\n" + proc.stderr)
        cls = KAFKA_ERRORS.get(name or "", QuorumToolError)
        raise cls(f"{what} failed: {name or 'kafka-metadata-quorum'}: {message}", name)
