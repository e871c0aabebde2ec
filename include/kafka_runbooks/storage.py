"""Where state and artifacts live: one store for everything under the data location.

Roll progress, the sweeps' memory, execution state, snapshots, plans, reports, progress
files, the decision journal and the per-cluster leases all go through :class:`Store`, so a
deployment chooses **one** place for them with **one** setting:

- ``KAFKA_RUNBOOKS_DATA_URL``: an fsspec URL (``s3://bucket/prefix``, ``gs://…``,
  ``abfs://…``, ``file:///…`` or a plain path). With Celery or Kubernetes workers this is an
  object store every worker and Spark executor reaches: no shared disk needed.
- else ``KAFKA_RUNBOOKS_DATA_DIR`` (a local path, as before), else
  ``$AIRFLOW_HOME/kafka_runbooks``, else ``~/kafka_runbooks``.

Credentials never sit in the URL: the Airflow layer turns the connection named by
``KAFKA_RUNBOOKS_DATA_CONN_ID`` into fsspec options (:func:`set_options_provider`);
without one, the store's own library finds them (the AWS chain: env, IRSA, instance role).
``KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS`` (JSON) adds options that are not secret (an
``endpoint_url``, a region).

The library is fsspec (what Airflow's ``ObjectStoragePath`` wraps), imported only when a
store is first used, so this module imports without Airflow and without a network.

**No half-written file.** Locally every write goes to a temporary file in the same folder,
fsynced, then renamed over the name. On an object store one object is one PUT, which the
store applies whole or not at all.

**Compare-and-set** (:meth:`Store.create`, :meth:`Store.swap`; the lease's store) for state
two writers can race on: locally a hard link (fails if the name exists) and an ``flock``
around compare-and-replace; on S3 the conditional writes ``If-None-Match: *`` and
``If-Match: <ETag>`` (Amazon S3 since 2024). A store that accepts those headers but ignores
them would let two racers both win, so before its first compare-and-set a store is probed
once, each condition both ways (``If-None-Match: *`` on PUT; ``If-Match`` on PUT and on
DELETE, with the current and with a stale ETag): one that fails the probe raises
:class:`ConditionalWritesUnsupported` instead of pretending. S3Proxy 2.6.0
was such a store (its PutObject ignored both headers: gaul/s3proxy#627); 4.1.0, which the
local stack runs, honours them.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import posixpath
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from kafka_runbooks.errors import BadInput, SafetyRefusal

log = logging.getLogger("kafka_runbooks.storage")

DATA_URL_ENV = "KAFKA_RUNBOOKS_DATA_URL"
DATA_DIR_ENV = "KAFKA_RUNBOOKS_DATA_DIR"
OPTIONS_ENV = "KAFKA_RUNBOOKS_DATA_STORAGE_OPTIONS"
CONN_ENV = "KAFKA_RUNBOOKS_DATA_CONN_ID"
PROBE_KEY = ".conditional-write-probe"

# S3-compatible servers reject botocore's default flexible checksums (x-amz-checksum-*)
# unless they implement them (S3Proxy 2.6.0 answers "Unknown header"): send them only
# where the API requires them. Amazon S3 accepts either way.
# No listings cache: other processes write here too (Spark jobs, other workers), and s3fs
# answers reads and exists() from a folder's cached listing, which never learns of a file
# someone else added after this process listed the folder (a job's summary.json would stay
# "missing" for a long-lived worker).
S3_DEFAULTS: dict[str, Any] = {
    "config_kwargs": {
        "request_checksum_calculation": "when_required",
        "response_checksum_validation": "when_required",
    },
    "use_listings_cache": False,
}


class ConditionalWritesUnsupported(SafetyRefusal):
    """The store cannot refuse a write on a condition, so a compare-and-set would lie."""


def local_default() -> str:
    """The local data folder when no path or URL is set: ``$KAFKA_RUNBOOKS_DATA_DIR``, else
    ``$AIRFLOW_HOME/kafka_runbooks``, else ``~/kafka_runbooks``."""
    explicit = os.environ.get(DATA_DIR_ENV)
    if explicit:
        return explicit
    home = os.environ.get("AIRFLOW_HOME")
    return str(Path(home) / "kafka_runbooks") if home else str(Path.home() / "kafka_runbooks")


def data_dir() -> Path:
    """The local data folder: the data location when it is a path or ``file://``, else the local
    default (the decision journal's file when the store is local)."""
    url = data_url()
    if protocol_of(url) == "file":
        return Path(url.removeprefix("file://"))
    return Path(local_default())


def data_url() -> str:
    """The data location as configured (see the module docstring), without a trailing slash."""
    url = (os.environ.get(DATA_URL_ENV) or "").strip()
    return (url or local_default()).rstrip("/") or "/"


def protocol_of(url: str) -> str:
    """``s3`` for ``s3://…`` (``s3a``/``s3n`` too), ``file`` for a path or ``file://``."""
    if "://" not in url:
        return "file"
    proto = url.split("://", 1)[0].lower()
    return "s3" if proto in ("s3a", "s3n") else proto


# ---------------------------------------------------------------- options and credentials

_options_provider: Callable[[str], dict[str, Any]] | None = None


def set_options_provider(provider: Callable[[str], dict[str, Any]] | None) -> None:
    """The Airflow layer registers how to turn ``KAFKA_RUNBOOKS_DATA_CONN_ID`` into options.

    The provider gets the protocol (``s3``, ``gs``…) and returns fsspec options, secrets
    included; they are never logged and never written anywhere.
    """
    global _options_provider
    _options_provider = provider
    _STORES.clear()


def storage_options(url: str) -> dict[str, Any]:
    """fsspec options for ``url``: defaults for the protocol, the JSON setting, the connection."""
    proto = protocol_of(url)
    out: dict[str, Any] = json.loads(json.dumps(S3_DEFAULTS)) if proto == "s3" else {}
    raw = os.environ.get(OPTIONS_ENV)
    if raw:
        extra = json.loads(raw)
        if not isinstance(extra, dict):
            raise BadInput(f"{OPTIONS_ENV} must be a JSON object of fsspec options")
        _merge(out, extra)
    if proto != "file" and _options_provider is not None:
        _merge(out, _options_provider(proto) or {})
    return out


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


# ---------------------------------------------------------------- the store


class Store:
    """Text and bytes under keys (``/``-separated paths) below one root URL."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/") or "/"
        self.protocol = protocol_of(self.url)
        self.is_local = self.protocol == "file"
        self._options = options
        self._fs = None
        self._conditional: bool | None = None
        self._conditional_failure: str | None = None  # what the probe saw the store do wrong
        self._warned_unlocked = False
        self._lock = threading.Lock()
        if self.is_local:
            self.root = self.url[len("file://") :] if self.url.startswith("file://") else self.url
        else:
            self.root = self.url.split("://", 1)[1]

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    @property
    def fs(self):
        """The fsspec filesystem (created on first use: no import or network before)."""
        if self._fs is None:
            import fsspec

            options = self._options if self._options is not None else storage_options(self.url)
            self._fs = fsspec.filesystem(self.protocol, **options)
        return self._fs

    # ------------------------------------------------------------ names

    def path(self, key: str) -> str:
        """The store's own path of ``key`` (no scheme), for fsspec calls."""
        key = _clean(key)
        return posixpath.join(self.root, key) if key else self.root

    def url_of(self, key: str = "") -> str:
        """Full URL of ``key``: a local path, or ``s3://bucket/prefix/key``."""
        return self.path(key) if self.is_local else f"{self.protocol}://{self.path(key)}"

    def local_path(self, key: str = "") -> Path:
        """The key as a local filesystem path, for tools that need a real file; refuses (BadInput) on an
        object store rather than hand back a path nothing can open."""
        if not self.is_local:
            raise BadInput(f"{self.url} is not a local path")
        return Path(self.path(key))

    # ------------------------------------------------------------ plain reads and writes

    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        try:
            if self.is_local:
                return Path(self.path(key)).read_bytes()
            return self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            return None

    def read_text(self, key: str) -> str | None:
        """The object as UTF-8 text, or None when there is none (absence is not an empty file)."""
        data = self.read_bytes(key)
        return None if data is None else data.decode("utf-8")

    # the lease's store reads with ``read``
    read = read_text

    def write_bytes(self, key: str, data: bytes) -> None:
        """Replace ``key`` whole: a reader sees the old or the new object, never a part."""
        if self.is_local:
            _write_local_atomic(Path(self.path(key)), data)
        else:
            self.fs.pipe_file(self.path(key), data)

    def write_text(self, key: str, text: str) -> None:
        """Replace ``key`` whole with UTF-8 ``text`` (see :meth:`write_bytes`: never half-written)."""
        self.write_bytes(key, text.encode("utf-8"))

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key`` now (a file locally, an object on a remote store)."""
        if self.is_local:
            return Path(self.path(key)).exists()
        return bool(self.fs.exists(self.path(key)))

    def delete(self, key: str) -> bool:
        """Remove ``key``; False if it was not there."""
        try:
            if self.is_local:
                Path(self.path(key)).unlink()
            else:
                if not self.fs.exists(self.path(key)):
                    return False
                self.fs.rm_file(self.path(key))
            return True
        except FileNotFoundError:
            return False

    def list(self, prefix: str = "") -> list[str]:
        """Every key below ``prefix`` (files only, sorted), relative to the store's root."""
        base = self.path(prefix)
        if self.is_local:
            root = Path(base)
            if not root.is_dir():
                return []
            names = [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")]
            return sorted(str(p.relative_to(self.root)).replace(os.sep, "/") for p in names)
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        root = self.root.rstrip("/") + "/"
        keys = {f[len(root) :].rstrip("/") for f in found if f.startswith(root)}
        # some stores keep a folder as an empty marker object: not a key of ours
        folders = {k.rsplit("/", 1)[0] for k in keys if "/" in k}
        return sorted(k for k in keys if k and k not in folders)

    def upload_dir(self, local_dir: Path | str, prefix: str) -> list[str]:
        """Copy a local folder's files under ``prefix`` (each file one whole write); the keys."""
        local_dir = Path(local_dir)
        keys = []
        for file in sorted(p for p in local_dir.rglob("*") if p.is_file()):
            rel = str(file.relative_to(local_dir)).replace(os.sep, "/")
            if rel.startswith(".") or "/." in rel or rel.endswith(".crc"):
                continue  # Spark's checksum and marker files
            key = f"{_clean(prefix)}/{rel}"
            self.write_bytes(key, file.read_bytes())
            keys.append(key)
        return keys

    def download_dir(self, prefix: str, local_dir: Path | str) -> Path:
        """Copy every key under ``prefix`` into ``local_dir`` (for tools that need files)."""
        local_dir = Path(local_dir)
        prefix = _clean(prefix)
        for key in self.list(prefix):
            target = local_dir / key[len(prefix) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read_bytes(key) or b"")
        return local_dir

    # ------------------------------------------------------------ compare-and-set

    def create(self, key: str, text: str) -> bool:
        """Write ``text`` under ``key`` only if nothing is there; False if something is."""
        if self.is_local:
            return _local_create(Path(self.path(key)), text.encode("utf-8"))
        self.require_conditional_writes()
        return self._put_if(key, text.encode("utf-8"), IfNoneMatch="*")

    def swap(self, key: str, expected: str, text: str | None) -> bool:
        """Replace (or delete, ``text=None``) only if the current text is ``expected``."""
        if self.is_local:
            return _local_swap(Path(self.path(key)), expected, text)
        self.require_conditional_writes()
        current, etag = self._read_with_etag(key)
        if current is None or current.decode("utf-8") != expected:
            return False
        if text is None:
            return self._delete_if(key, etag)
        return self._put_if(key, text.encode("utf-8"), IfMatch=etag)

    def supports_conditional_writes(self) -> bool:
        """Probe once whether the store refuses a create over an existing object."""
        if self.is_local:
            return True
        with self._lock:
            if self._conditional is None:
                self._conditional = self._probe()
            return self._conditional

    def require_conditional_writes(self) -> None:
        """Refuse (ConditionalWritesUnsupported) before any compare-and-set on a store that cannot refuse a
        write on a condition, since two racers could both win there; only s3:// is probed (local paths
        never reach here)."""
        if self.protocol != "s3":
            raise ConditionalWritesUnsupported(
                f"compare-and-set on {self.protocol}:// is not implemented here (only local paths and s3://); "
                "keep the leases on an S3 bucket or a local path"
            )
        if not self.supports_conditional_writes():
            raise ConditionalWritesUnsupported(
                f"the store at {self.url} {self._conditional_failure}; it ignores "
                "conditional writes, so two runs could both take a lease. Use a store that honours "
                "If-None-Match and If-Match on PUT and DELETE (Amazon S3, MinIO, Ceph RGW, Cloudflare R2) "
                "for KAFKA_RUNBOOKS_DATA_URL"
            )

    def _probe(self) -> bool:
        """Whether the store honours every condition a compare-and-set relies on.

        A lease is created with ``If-None-Match: *``, handed on with ``If-Match`` on PUT and
        released with ``If-Match`` on DELETE: a store that honours one and ignores another
        still lets two runs both win, so each is tried both ways (the matching write goes
        through, the stale one is refused). The first that fails is kept for the refusal.
        """
        key = f"{PROBE_KEY}/{uuid.uuid4().hex}"
        try:
            failure = self._probe_steps(key)
        finally:
            self.delete(key)
        self._conditional_failure = failure
        log.info("store %s %s", self.url, failure or "honours conditional writes")
        return failure is None

    def _probe_steps(self, key: str) -> str | None:
        """Each step of the probe in order; the first broken promise, or None."""
        if not self._put_if(key, b"probe", IfNoneMatch="*"):
            return "refused an If-None-Match: * write of a new object"
        if self._put_if(key, b"probe again", IfNoneMatch="*"):
            return "accepted a second If-None-Match: * write of the same object: it ignores If-None-Match"
        _, first = self._read_with_etag(key)
        if not self._put_if(key, b"probe swapped", IfMatch=first):
            return "refused an If-Match write with the object's current ETag"
        if self._put_if(key, b"probe stale", IfMatch=first):
            return "accepted an If-Match write with a stale ETag: it ignores If-Match on PUT"
        _, second = self._read_with_etag(key)
        if self._delete_if(key, first):
            return "deleted with a stale If-Match ETag: it ignores If-Match on DELETE"
        if not self._delete_if(key, second):
            return "refused an If-Match delete with the object's current ETag"
        return None

    def _bucket_key(self, key: str) -> tuple[str, str]:
        bucket, _, rest = self.path(key).partition("/")
        return bucket, rest

    def _put_if(self, key: str, data: bytes, **condition: str) -> bool:
        bucket, name = self._bucket_key(key)
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=name, Body=data, **condition)
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        self.fs.invalidate_cache(self.path(key))
        return True

    def _delete_if(self, key: str, etag: str) -> bool:
        bucket, name = self._bucket_key(key)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=name, IfMatch=etag)
        except OSError as exc:
            if _precondition_failed(exc) or isinstance(exc, FileNotFoundError):
                return False
            raise
        self.fs.invalidate_cache(self.path(key))
        return True

    def _read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        bucket, name = self._bucket_key(key)
        try:
            response = self.fs.call_s3("get_object", Bucket=bucket, Key=name)
        except FileNotFoundError:
            return None, None
        body = response["Body"]
        data = _read_body(self.fs, body)
        return data, response["ETag"]

    # ------------------------------------------------------------ a lock on top

    @contextmanager
    def locked(self, key: str, ttl_s: float = 600.0, owner: str | None = None) -> Iterator[None]:
        """Hold ``key`` as a lock for a load-decide-save (a sweep's state file).

        Locally an ``flock``; on an object store a lock object made with :meth:`create`
        (expires after ``ttl_s`` so a killed worker does not hold it for good), released
        with :meth:`swap`. On a store without conditional writes there is no lock to take:
        a warning says so once, and the DAG's one active sweep run is the only guard.
        """
        if self.is_local:
            with self._flocked(key):
                yield
        elif self.protocol != "s3" or not self.supports_conditional_writes():
            self._warn_unlocked(key)
            yield
        else:
            with self._lock_object(key, ttl_s, owner):
                yield

    @contextmanager
    def _flocked(self, key: str) -> Iterator[None]:
        """A local key's lock: an ``flock`` on the file itself, released by the kernel if the
        process dies, so nothing can outlive its holder."""
        path = Path(self.path(key))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _warn_unlocked(self, key: str) -> None:
        """No way to make a lock object on this store: the sweeps' own one-run-at-a-time
        (max_active_runs=1, one mapped task per cluster) is what keeps writers apart. Said once."""
        if not self._warned_unlocked:
            self._warned_unlocked = True
            log.warning(
                "store %s has no conditional writes: %s is not locked (each sweep runs one at a time)",
                self.url,
                key,
            )

    @contextmanager
    def _lock_object(self, key: str, ttl_s: float, owner: str | None) -> Iterator[None]:
        """An object-store lock: created only if absent, taken over once expired (its holder was
        killed), and removed only if it is still ours, all by conditional writes."""
        import time

        from kafka_runbooks import retries

        mine = json.dumps({"owner": owner or uuid.uuid4().hex, "expires_at": time.time() + ttl_s})
        retries.until_true(lambda: _take_lock(self, key, mine), first_s=0.2, max_s=5.0)
        try:
            yield
        finally:
            self.swap(key, mine, None)


def _take_lock(store: Store, key: str, mine: str) -> bool:
    """One attempt at the lock object: create it; or, when the one there has expired (its holder
    stopped), remove exactly that one and try again at once. False: someone holds it."""
    import time

    while not store.create(key, mine):
        current = store.read_text(key)
        if current is None:
            return False
        try:
            expired = json.loads(current).get("expires_at", 0) < time.time()
        except ValueError:
            expired = True
        if not (expired and store.swap(key, current, None)):
            return False
        log.warning("lock %s expired (its holder stopped); taken over", store.url_of(key))
    return True


def _read_body(fs, body) -> bytes:
    from fsspec.asyn import sync

    async def read() -> bytes:
        """Read the whole streamed body on fsspec's event loop (the body is an async stream)."""
        async with body as stream:
            return await stream.read()

    return sync(fs.loop, read)


def _precondition_failed(exc: BaseException) -> bool:
    """A 412 (or 409 ConditionalRequestConflict) from the store, however s3fs wrapped it."""
    if isinstance(exc, FileExistsError):
        return True
    cause = exc.__cause__ or exc.__context__
    response = getattr(cause, "response", None) or {}
    code = (response.get("Error") or {}).get("Code", "")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (412, 409)


def _clean(key: str) -> str:
    key = str(key).replace(os.sep, "/").strip("/")
    parts = [p for p in key.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadInput(f"a storage key may not climb out of the data location: {key!r}")
    return "/".join(parts)


# ---------------------------------------------------------------- local primitives


def _write_local_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _local_temp(path: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    with open(folder / ".cas.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _local_create(path: Path, data: bytes) -> bool:
    """``link`` fails with EEXIST when the name exists: exactly one racing creator wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _local_temp(path, data)
    try:
        with _folder_lock(path.parent):
            os.link(tmp, path)
        return True
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            return False
        raise
    finally:
        os.unlink(tmp)


def _local_swap(path: Path, expected: str, text: str | None) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(path.parent):
        try:
            current = path.read_text()
        except FileNotFoundError:
            return False
        if current != expected:
            return False
        if text is None:
            path.unlink()
        else:
            os.replace(_local_temp(path, text.encode("utf-8")), path)
        return True


# ---------------------------------------------------------------- the configured store

_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def store(url: str | None = None) -> Store:
    """The store at ``url`` (default: the configured data location), one per URL per process."""
    url = (url or data_url()).rstrip("/") or "/"
    with _STORES_LOCK:
        found = _STORES.get(url)
        if found is None:
            found = _STORES[url] = Store(url)
        return found


class StorePath(NamedTuple):
    """A key of a store, used the way a run's code used a folder and its files.

    A run's folder (``reassign/<dag>/<run>``) and everything in it live in the data store,
    so the task that writes a file and the task that reads it may run on different
    workers. ``/`` joins, ``name``/``parent`` and the read/write methods mirror
    :class:`pathlib.Path`, so code written for a local folder reads the same; every write
    is whole (:meth:`Store.write_bytes`). It is a ``(store, key)`` tuple, the form the
    fenced state functions take. ``str()`` is the URL (a plain path on a local store).
    """

    store: Store
    key: str

    def __truediv__(self, name: str) -> StorePath:
        return StorePath(self.store, _clean(f"{self.key}/{name}"))

    def __str__(self) -> str:
        return self.store.url_of(self.key)

    @property
    def name(self) -> str:
        """The last ``/``-separated part of the key, like :attr:`pathlib.Path.name`."""
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> StorePath:
        """The key one folder up, on the same store, like :attr:`pathlib.Path.parent`."""
        return StorePath(self.store, self.key.rpartition("/")[0])

    def with_name(self, name: str) -> StorePath:
        """A sibling key in the same folder (``parent / name``)."""
        return self.parent / name

    def exists(self) -> bool:
        """Whether the store holds an object under this key now."""
        return self.store.exists(self.key)

    def read_bytes(self) -> bytes:
        """The object's bytes; FileNotFoundError when absent, as :meth:`pathlib.Path.read_bytes` does (the
        store itself says None)."""
        data = self.store.read_bytes(self.key)
        if data is None:
            raise FileNotFoundError(f"{self} does not exist")
        return data

    def read_text(self) -> str:
        """The object as UTF-8 text; FileNotFoundError when absent."""
        return self.read_bytes().decode("utf-8")

    def write_bytes(self, data: bytes) -> None:
        """Replace the object whole (a reader sees the old or the new one, never a part)."""
        self.store.write_bytes(self.key, data)

    def write_text(self, text: str) -> None:
        """Replace the object whole with UTF-8 ``text``."""
        self.store.write_text(self.key, text)

    def unlink(self, missing_ok: bool = False) -> None:
        """Delete the object; FileNotFoundError when it was not there unless ``missing_ok``, as in pathlib."""
        if not self.store.delete(self.key) and not missing_ok:
            raise FileNotFoundError(f"{self} does not exist")

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        """Nothing to do: a store has keys, not folders (a local write makes its parents)."""

    def files(self) -> list[StorePath]:
        """Every key below this one, as paths (sorted)."""
        return [StorePath(self.store, k) for k in self.store.list(self.key)]

    def open_binary(self):
        """A readable binary file object (streamed from an object store, not read whole)."""
        if self.store.is_local:
            return open(self.store.path(self.key), "rb")  # noqa: SIM115 (the caller closes it)
        return self.store.fs.open(self.store.path(self.key), "rb")


def locate(where: StorePath | tuple[Store, str] | Path | str) -> StorePath:
    """``where`` as a :class:`StorePath`: a key of the configured store when it lies under it
    (a URL or path from an XCom), else the folder or file itself on its own store."""
    if isinstance(where, StorePath):
        return where
    if isinstance(where, tuple):
        return StorePath(*where)
    text = str(where)
    if text.startswith("file://"):
        text = text[len("file://") :]
    if "://" not in text:
        text = str(Path(text).resolve())
    home = store()
    root = str(Path(home.root).resolve()) if home.is_local else home.url.rstrip("/")
    if text == root or text.startswith(root + "/"):
        return StorePath(home, _clean(text[len(root) :]))
    parent, _, name = text.rstrip("/").rpartition("/")
    return StorePath(store(parent or "/"), name)


class Records:
    """Named JSON records in one folder of a store, with compare-and-set (the lease's store).

    ``create``/``read``/``swap`` take a record's name (a cluster's connection id) and keep
    it at ``<prefix>/<safe name>.json``: ``Records(store(), "state/leases")`` is the
    :class:`kafka_runbooks.lease.LeaseStore` of the configured data location.
    """

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = _clean(prefix)

    def key(self, name: str) -> str:
        """The store key of record ``name``: ``<prefix>/<safe name>.json`` (the name made safe for a path)."""
        from kafka_runbooks.paths import safe_name

        return f"{self.prefix}/{safe_name(name)}.json"

    def create(self, name: str, text: str) -> bool:
        """Write the record only if none exists (compare-and-set); False when another writer holds it."""
        return self.store.create(self.key(name), text)

    def read(self, name: str) -> str | None:
        """The record's text, or None when there is none."""
        return self.store.read_text(self.key(name))

    def swap(self, name: str, expected: str, text: str | None) -> bool:
        """Replace (or delete, ``text=None``) the record only if it still reads ``expected``; False when
        another writer changed it first."""
        return self.store.swap(self.key(name), expected, text)


# ---------------------------------------------------------------- Spark (Hadoop's S3A)


def s3a_url(url: str) -> str:
    """The data store URL as Hadoop's S3A connector names it (``s3://b/k`` -> ``s3a://b/k``)."""
    return "s3a://" + url.split("://", 1)[1] if protocol_of(url) == "s3" else url


def s3_environment(url: str | None = None) -> dict[str, str]:
    """The S3 keys of the store's options (from its connection) as the ``AWS_*`` variables S3A
    reads; empty when the options name none (S3A then finds its own: ``AWS_*``, an instance role,
    or IRSA once ``fs.s3a.aws.credentials.provider`` names the web-identity provider)."""
    url = url or data_url()
    if protocol_of(url) != "s3":
        return {}
    options = storage_options(url)
    names = {"key": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY", "token": "AWS_SESSION_TOKEN"}
    return {env: str(options[opt]) for opt, env in names.items() if options.get(opt)}


def spark_conf(url: str | None = None) -> dict[str, str]:
    """Spark settings for reading and writing the data store's ``s3a://`` URLs (none for a path).

    Needs on the driver and executors' class path: hadoop-aws, the AWS SDK v2 bundle and the
    S3 analytics accelerator at the versions of Spark's Hadoop (``stack/spark-s3a/pom.xml``).
    No secret goes into the conf (it would be on a command line): S3A finds credentials in
    its own chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in the driver's
    environment, an instance role; IRSA only with ``fs.s3a.aws.credentials.provider`` set to the
    web-identity provider, which S3A's default chain lacks). With an ``endpoint_url`` (an S3-compatible store):
    path-style requests, and no bulk DeleteObjects, whose checksum header S3Proxy 2.6.0
    does not know; checksums only where an API requires them, on every store.
    """
    url = url or data_url()
    if protocol_of(url) != "s3":
        return {}
    client = storage_options(url).get("client_kwargs") or {}
    java = "-Daws.requestChecksumCalculation=WHEN_REQUIRED -Daws.responseChecksumValidation=WHEN_REQUIRED"
    conf = {
        "spark.driver.extraJavaOptions": java,
        "spark.executor.extraJavaOptions": java,
    }
    if client.get("region_name"):
        conf["spark.hadoop.fs.s3a.endpoint.region"] = client["region_name"]
    endpoint = client.get("endpoint_url")
    if endpoint:
        conf.update(
            {
                "spark.hadoop.fs.s3a.endpoint": endpoint,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
                "spark.hadoop.fs.s3a.multiobjectdelete.enable": "false",
            }
        )
    return conf
