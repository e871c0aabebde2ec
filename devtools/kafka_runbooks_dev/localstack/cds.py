"""A class-data-sharing archive (AppCDS, JDK 17) for the local stack's Kafka JVMs.

The test suite starts Kafka nodes about a hundred times (restarts, rolls, private stacks); each
start parsed and verified the same ~7,800 classes again, ~4.7 CPU-s and ~12 s to ready on the
2-core machine. Mapped from an archive they load in ~3.5 CPU-s and ~10 s (three restarts of
one broker each way, with the machine under load).

The archive is built once per jar set (``-Xshare:dump`` from the class list a broker loaded,
kept gzipped in ``stack/kafka-node.classlist.gz``) and lives beside the jars, so each Kafka
release (its own folder, ``.stack/lib-<version>``) gets its own. The list is a 4.3.1 broker's;
replayed on another release's jars the dump skips the classes that release lacks (a "Preload
Warning" each) and archives the rest: it succeeded for 3.9.2, 4.0.2, 4.1.2, 4.2.2 and 4.4.0 (Dec 2026),
and their nodes map it. It is an optimisation only: when it cannot be built or the JVM rejects it
(another JDK, a damaged file), the nodes start as before (``-Xshare:auto``; the unit test
``test_a_jvm_that_rejects_the_archive_starts_without_it``).

To regenerate the class list after a Kafka upgrade: start a broker with
``-XX:DumpLoadedClassList=kafka-node.classlist``, let it become ready, gzip the file there.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import logging
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

CLASS_LIST = Path(__file__).resolve().parents[3] / "stack" / "kafka-node.classlist.gz"
DUMP_TIMEOUT_S = 600.0


def archive_path(lib_dir: Path, classpath: str) -> Path:
    """Where the archive for this exact class path (jar names, sizes, mtimes) lives."""
    h = hashlib.sha256(classpath.encode())
    for jar in classpath.split(":"):
        st = Path(jar).stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return lib_dir / "cds" / f"kafka-{h.hexdigest()[:16]}.jsa"


def jvm_flags(lib_dir: Path, classpath: str) -> list[str]:
    """The flags that map the archive, or none while there is no archive."""
    archive = archive_path(lib_dir, classpath)
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"] if archive.exists() else []


def ensure_archive(lib_dir: Path, classpath: str) -> Path | None:
    """Build the archive once (two lanes at once: one builds, the other waits); None if it failed."""
    archive = archive_path(lib_dir, classpath)
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        return _dump(archive, classpath)


def _dump(archive: Path, classpath: str) -> Path | None:
    """``java -Xshare:dump`` into a temporary file, renamed into place only when it succeeded."""
    listing = archive.with_suffix(".classlist")
    listing.write_bytes(gzip.decompress(CLASS_LIST.read_bytes()))
    partial = archive.with_suffix(".jsa.tmp")
    output = archive.with_suffix(".log")
    argv = [
        "java",
        "-Xshare:dump",
        f"-XX:SharedClassListFile={listing}",
        f"-XX:SharedArchiveFile={partial}",
        "-cp",
        classpath,
    ]
    with open(output, "wb") as out:
        try:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=DUMP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("no class-data-sharing archive for the Kafka nodes (%s); they start without", exc)
            return None
    if done.returncode != 0 or not partial.exists():
        log.warning("no class-data-sharing archive for the Kafka nodes: see %s; they start without", output)
        return None
    partial.rename(archive)
    return archive
