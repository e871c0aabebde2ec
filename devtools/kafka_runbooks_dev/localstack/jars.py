"""The Kafka release the local stack runs, and that release's jars.

``KR_KAFKA_VERSION`` picks the release of every node (brokers, controllers, Connect) for
``make demo``, ``make test``, ``kstack`` and the benchmarks alike; by default the one
``stack/pom.xml`` pins. A supported line (``4.2``) stands for the patch release pinned for it
(:data:`LINES`). Each release's jars live in a folder of their own, ``.stack/lib-<version>/``,
fetched once through Maven from a pom generated from ``stack/pom.xml`` with that
``kafka.version`` (``.stack/lib-<version>.pom.xml``), with their own class-data-sharing archive.

Maven Central does not serve every jar of every release (``connect-file`` 4.2.1, 4.2.2 and
4.4.0 were refused here). A part the stack can do without (:data:`OPTIONAL_PARTS`) is left out,
the rest fetched, and what is missing recorded in the folder (``.missing.json``): the stack
says so at start and in ``kstack status``, naming the artifact and the release. A jar of the
broker itself that is not served fails the fetch, naming it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from kafka_runbooks_dev.localstack import cds

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[3]
STACK_ASSETS = PROJECT_ROOT / "stack"
POM = STACK_ASSETS / "pom.xml"
LIB_ROOT = PROJECT_ROOT / ".stack"
ENV = "KR_KAFKA_VERSION"
MISSING_FILE = ".missing.json"
# The newest patch release of each supported line whose broker jars Maven Central serves here
# (checked with mvn on Dec 1, 2026: 3.9.2, 4.0.2, 4.1.2, 4.2.2, 4.3.1 and 4.4.0 resolve; 4.2.2
# and 4.4.0 without connect-file, which 4.2.0 still has). KRaft only: no ZooKeeper mode.
LINES = {"3.9": "3.9.2", "4.0": "4.0.2", "4.1": "4.1.2", "4.2": "4.2.2", "4.3": "4.3.1", "4.4": "4.4.0"}
# stacks formatted before stack.json recorded the release ran the pom's 4.3.1
FORMATTED_BEFORE_RECORDS = "4.3.1"
_VERSION = re.compile(r"\d+\.\d+\.\d+")
_KAFKA_VERSION = re.compile(r"<kafka\.version>([^<]*)</kafka\.version>")
_DEPENDENCY = re.compile(r"\s*<dependency>.*?</dependency>", re.DOTALL)
# what Maven says of an artifact the registry does not serve (a 'no', not a network failure):
# "Could not find artifact G:A:jar:V in central", "Failure to find G:A:jar:V in ... was cached",
# "G:A:jar:V was not found in ... during a previous attempt" (Maven 3.8's three wordings)
_COORDINATE = r"([\w.\-]+):([\w.\-]+):[\w.\-]+(?::[\w.\-]+)*"
_NOT_SERVED = re.compile(
    rf"(?:Could not find artifact|Failure to find) {_COORDINATE}|{_COORDINATE} was not found in"
)


class StackError(RuntimeError):
    """The local stack could not do what was asked; the message says why."""


@dataclass(frozen=True)
class Part:
    """A part of the stack it can start without: its artifacts and what the stack does then."""

    name: str
    artifacts: tuple[str, ...]
    without: str
    needs: str | None = None  # the part it is useless without (left out with it)


OPTIONAL_PARTS = (
    Part("the Connect worker", ("connect-runtime", "connect-json"), "no Connect worker is started"),
    Part(
        "the file connectors",
        ("connect-file",),
        "the Connect worker starts without the file connectors (FileStreamSource/SinkConnector)",
        needs="the Connect worker",
    ),
)
CONNECT_WORKER, FILE_CONNECTORS = (p.name for p in OPTIONAL_PARTS)


@dataclass(frozen=True)
class Missing:
    """One part a release's folder lacks because Maven Central did not serve its artifact."""

    part: str
    artifact: str  # group:artifact:version
    release: str
    without: str

    def line(self) -> str:
        """The one line the stack says at start and in ``kstack status``."""
        return f"Kafka {self.release}: {self.artifact} is not served by Maven Central: {self.without}"


def pinned() -> str:
    """The release ``stack/pom.xml`` pins (the default)."""
    found = _KAFKA_VERSION.search(POM.read_text())
    if found is None:
        raise StackError(f"{POM} has no kafka.version")
    return found.group(1)


def selected(env: Mapping[str, str] | None = None, recorded: str | None = None) -> str:
    """``KR_KAFKA_VERSION`` (a release, or a supported line for its pinned patch), else the
    release a stack ``recorded`` (it keeps it, as it keeps its shape), else the pinned one;
    anything else is refused before anything is fetched or started."""
    value = (os.environ if env is None else env).get(ENV, "").strip() or recorded or pinned()
    value = LINES.get(value, value)
    if not _VERSION.fullmatch(value):
        raise StackError(
            f"{ENV}={value!r} is not a Kafka release (e.g. 4.3.1, or a line: {', '.join(LINES)})"
        )
    if value.rsplit(".", 1)[0] not in LINES:
        raise StackError(
            f"{ENV}={value}: Kafka {value} is not supported by the local stack "
            f"(KRaft releases {', '.join(f'{line}.x' for line in LINES)})"
        )
    return value


def lib_dir_for(version: str) -> Path:
    """Where a release's jars live: ``.stack/lib-<version>``."""
    return LIB_ROOT / f"lib-{version}"


def release_pom(version: str, left_out: tuple[str, ...] = ()) -> str:
    """``stack/pom.xml`` with ``kafka.version`` set to ``version``, without the dependencies
    whose artifactId is in ``left_out``."""
    text = _KAFKA_VERSION.sub(f"<kafka.version>{version}</kafka.version>", POM.read_text())
    return _DEPENDENCY.sub(
        lambda dep: (
            "" if any(f"<artifactId>{a}</artifactId>" in dep.group(0) for a in left_out) else dep.group(0)
        ),
        text,
    )


def not_served(mvn_output: str) -> list[str]:
    """The artifacts (``group:artifact``) Maven said the registry does not have."""
    found = [
        f"{m.group(1) or m.group(3)}:{m.group(2) or m.group(4)}" for m in _NOT_SERVED.finditer(mvn_output)
    ]
    return list(dict.fromkeys(found))


def missing_parts(lib_dir: Path) -> list[Missing]:
    """What the release in ``lib_dir`` lacks (empty for a complete one)."""
    path = lib_dir / MISSING_FILE
    if not path.exists():
        return []
    return [Missing(**entry) for entry in json.loads(path.read_text())]


def lacks(lib_dir: Path, part: str) -> Missing | None:
    """Why ``lib_dir`` has no ``part`` (a part it needs counts too), or None when it has it."""
    wanted = {part} | {p.needs for p in OPTIONAL_PARTS if p.name == part and p.needs}
    return next((m for m in missing_parts(lib_dir) if m.part in wanted), None)


class _Reducer:
    """Leaves the optional parts Maven Central did not serve out of the pom, one retry each,
    and remembers what it left out; a required artifact not served is refused, named."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.missing: list[Missing] = []
        self.left_out: set[str] = set()

    def __call__(self, unresolved: list[str]) -> str | None:
        names = {u.split(":")[1]: u for u in unresolved}
        parts = [p for p in OPTIONAL_PARTS if set(p.artifacts) & set(names)]
        required = set(names) - {a for p in parts for a in p.artifacts}
        if not names or required or not parts:
            return None
        for part in parts:
            artifact = next(names[a] for a in part.artifacts if a in names)
            self.missing.append(Missing(part.name, f"{artifact}:{self.version}", self.version, part.without))
            dropped = [part] + [p for p in OPTIONAL_PARTS if p.needs == part.name]
            self.left_out.update(a for p in dropped for a in p.artifacts)
        return release_pom(self.version, tuple(sorted(self.left_out)))

    def record(self, lib_dir: Path) -> None:
        """Write what was left out into the folder (before its marker)."""
        (lib_dir / MISSING_FILE).write_text(json.dumps([asdict(m) for m in self.missing], indent=2))


def fetch_with_maven(
    pom: Path,
    lib_dir: Path,
    what: str,
    arrange: Callable[[Path], None] | None = None,
    reduce: Callable[[list[str]], str | None] | None = None,
) -> Path:
    """Copy the dependencies ``pom`` names from Maven Central into ``lib_dir``, once per pom.

    The Kafka nodes, S3Proxy and the S3A jars all run from jars fetched this way; a marker
    holding the pom's digest says the copy is complete and current. ``arrange`` lays the
    fetched jars out before the marker is written; ``what`` names them in messages. ``reduce``
    is asked, when Maven names artifacts it is not served, for a smaller pom to try instead
    (None: the fetch fails naming them).
    """
    marker = lib_dir / ".complete"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    if marker.exists() and marker.read_text().strip() == digest:
        return lib_dir
    lib_dir.parent.mkdir(parents=True, exist_ok=True)
    # two test lanes (or a test and `make demo`) may want the same jars at once: one fetches,
    # the other waits and finds them complete (a second fetch would empty the folder under the first)
    with open(lib_dir.with_name(lib_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text().strip() == digest:
            return lib_dir
        _fetch_locked(pom, lib_dir, what, reduce)
        if arrange is not None:
            arrange(lib_dir)
        marker.write_text(digest)
        return lib_dir


def _fetch_locked(
    pom: Path, lib_dir: Path, what: str, reduce: Callable[[list[str]], str | None] | None
) -> None:
    if shutil.which("mvn") is None:
        raise StackError(f"Maven (mvn) is needed to fetch {what} and is not on PATH")
    tried = pom
    for _ in range(len(OPTIONAL_PARTS) + 1):
        if lib_dir.exists():
            shutil.rmtree(lib_dir)
        lib_dir.mkdir(parents=True)
        log.info("fetching %s with Maven into %s", what, lib_dir)
        proc = subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(tried),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib_dir}",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return
        unresolved = not_served(proc.stdout + proc.stderr)
        smaller = reduce(unresolved) if reduce is not None else None
        if smaller is None:
            named = f" (not served: {', '.join(unresolved)})" if unresolved else ""
            raise StackError(
                f"mvn could not fetch {what}{named}:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"
            )
        log.warning("%s: %s not served by Maven Central; fetching the rest", what, ", ".join(unresolved))
        tried = lib_dir.with_name(lib_dir.name + ".fetched.pom.xml")
        tried.write_text(smaller)
    raise StackError(f"mvn could not fetch {what}: parts kept failing")


def _set_connect_plugins_apart(lib_dir: Path) -> None:
    """Connect loads the file connectors from its plugin path, not from the classpath."""
    plugin_dir = lib_dir / "connect-plugins" / "file-connectors"
    plugin_dir.mkdir(parents=True)
    for jar in lib_dir.glob("connect-file-*.jar"):
        jar.rename(plugin_dir / jar.name)


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``path`` whole (a temporary file renamed), and only when its text changes: two
    lanes generating the same pom never see a half-written one."""
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    partial.rename(path)


def ensure_jars(lib_dir: Path | None = None, version: str | None = None) -> Path:
    """Fetch one release's jars (default: :func:`selected`) once into their folder (default:
    :func:`lib_dir_for`), leaving out what Maven Central does not serve of the optional parts,
    and build their class-data-sharing archive (the nodes start faster with it; see :mod:`.cds`)."""
    version = version or selected()
    lib_dir = Path(lib_dir or lib_dir_for(version))
    pom = lib_dir.with_name(lib_dir.name + ".pom.xml")
    _write_if_changed(pom, release_pom(version))
    reducer = _Reducer(version)

    def arrange(folder: Path) -> None:
        reducer.record(folder)
        _set_connect_plugins_apart(folder)

    fetch_with_maven(pom, lib_dir, f"the Kafka {version} jars", arrange, reducer)
    cds.ensure_archive(lib_dir, kafka_classpath(lib_dir))
    return lib_dir


def kafka_classpath(lib_dir: Path) -> str:
    """Every jar of the Kafka nodes, in a fixed order (the archive is bound to it)."""
    jars = sorted(p for p in lib_dir.glob("*.jar") if not p.name.startswith("jmx_prometheus"))
    return os.pathsep.join(str(j) for j in jars)
