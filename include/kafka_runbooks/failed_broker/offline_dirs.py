"""Which log dirs of live brokers are offline, and since when: the sweep's memory for a failed disk.

A broker keeps running when one of its log dirs fails (KIP-112, KIP-858 in KRaft): the replicas
in it go offline on that broker only, and the failed-broker tracker (``failures``) never fires,
since the broker is available. The sweep therefore also reads every live broker's own
DescribeLogDirs answer (``kafka_runbooks.log_dirs``) and keeps, per (broker, dir), the time it
first saw the dir offline in ``state/offline_log_dirs/<conn id>.json`` in the data store: the
same kind of file as the failed brokers', for the same reasons (it survives a scheduler restart
and a cleared run; an operator can read it with ``jq`` or delete an entry to forget it).

What each answer means for a remembered dir:

- offline in the broker's own answer: still failed, its countdown goes on;
- answered, and online or no longer listed (a replaced disk, a changed ``log.dirs``): forgotten;
- the broker is down, fenced or unregistered: forgotten, since every replica on it is out, not one
  dir's: that is the failed-broker heal's case, and a dir seen offline after it returns counts
  from then;
- a live broker that did not answer (error, timeout): **unknown**. Unknown is not healthy (the
  entry is kept, its first-seen time with it) and never a trigger (nothing is due on it).

A broker is due when every offline dir of it is past the failure threshold (the runbook moves the
replicas of all of them; naming one of several is refused there), some replica sat in them, and
no run was started for it within ``retrigger_after``, nor a run for the same failure that an
operator stopped on purpose (never re-triggered: start it by hand). Whether a due broker's run starts is
decided by :func:`choose_log_dir_start`: only when the setting allows it (alert-only by default),
never while a broker is failed (the dead broker's heal goes first) or a reassignment runs on the
cluster, and one broker per cluster at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.failed_broker.failures import SweepTracker
from kafka_runbooks.log_dirs import OFFLINE, UNKNOWN, broker_log_dirs
from kafka_runbooks.model import ClusterState
from kafka_runbooks.state_file import ClusterStateFile, StateEntry

LOG_DIR_FAILURE_DAG_ID = "kafka_log_dir_failure"
MAX_LISTED = 20


def read_with_log_dirs(admin) -> ClusterState:
    """The sweep's read of a cluster (``admin``: a ClusterAdmin): the metadata, then the DescribeLogDirs
    answer of every available broker. A dead or fenced broker is not asked: it is the failed-broker
    heal's case, and waiting out its timeout would delay the heal's decision; a live broker that does
    not answer is an error entry (unknown)."""
    state = admin.read_state(include_log_dirs=False)
    state.log_dir_states, state.log_dir_errors = admin.describe_log_dir_states(state.alive_broker_ids())
    return state


@dataclass
class OfflineDir(StateEntry):
    """One offline log dir of one broker, as the sweeps have seen it (times on the worker's clock,
    compared only with each other)."""

    broker_id: int
    log_dir: str
    first_seen_ms: int
    error: str | None = None
    alerted_ms: int | None = None
    triggered_ms: int | None = None
    triggered_run_id: str | None = None

    @property
    def key(self) -> str:
        """One entry per (broker, dir): two brokers may use the same path."""
        return f"{self.broker_id}:{self.log_dir}"


class OfflineDirStore(ClusterStateFile):
    """First-seen times of the offline log dirs of one cluster's live brokers, in one JSON file."""

    kind = "offline_log_dirs"
    section = "log_dirs"

    def load(self) -> dict[str, OfflineDir]:
        """The remembered offline dirs by ``broker:dir``."""
        entries = (OfflineDir.from_dict(e) for e in self.read_entries().values())
        return {e.key: e for e in entries}

    def save(self, dirs: dict[str, OfflineDir]) -> None:
        """Replace the whole file: a dir no longer listed is forgotten."""
        self.write_entries({k: asdict(d) for k, d in sorted(dirs.items())})


@dataclass
class DirAssessment:
    """What one sweep saw of the log dirs and decided (before the start rules)."""

    now_ms: int
    offline: dict[str, OfflineDir]  # offline now, in the broker's own answer
    replicas: dict[int, list[str]] = field(default_factory=dict)  # broker -> partitions in its offline dirs
    unknown: dict[int, str] = field(default_factory=dict)  # live broker -> why its dirs are unknown
    kept_unknown: dict[str, OfflineDir] = field(default_factory=dict)  # remembered, now unknown
    recovered: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)
    due: list[int] = field(default_factory=list)
    records: list[decisions.DecisionRecord] = field(default_factory=list)

    def dirs_of(self, broker_id: int) -> list[OfflineDir]:
        """A broker's offline dirs: the runbook moves the replicas of all of them at once."""
        return [d for _, d in sorted(self.offline.items()) if d.broker_id == broker_id]

    def as_dict(self) -> dict[str, Any]:
        """The offline-dir assessment as the sweep's report and decision record show it (brokers whose dirs
        could not be read listed as unknown, with why)."""
        return {
            "now_ms": self.now_ms,
            "offline": {k: asdict(d) for k, d in sorted(self.offline.items())},
            "replicas": {str(b): r[:MAX_LISTED] for b, r in sorted(self.replicas.items())},
            "unknown": {str(b): why for b, why in sorted(self.unknown.items())},
            "kept_unknown": sorted(self.kept_unknown),
            "recovered": self.recovered,
            "alerts": self.alerts,
            "due": self.due,
        }


class OfflineDirTracker(SweepTracker[str, OfflineDir]):
    """Update the persisted offline dirs from one read of the cluster (with its DescribeLogDirs
    answers) and decide which brokers are due."""

    def observe(self, state: ClusterState) -> DirAssessment:
        """Compare the brokers' answers with the remembered dirs; persist; return the decisions.

        The caller starts a run for one due broker (:func:`choose_log_dir_start`) and then calls
        :meth:`mark_triggered`."""
        now_ms = self._now_ms()
        seen = {b: broker_log_dirs(state, b) for b in state.brokers}
        with self.store.locked():
            known = self.store.load()
            a = DirAssessment(now_ms=now_ms, offline={})
            self._read_answers(a, state, seen)
            self._forget_or_keep(a, state, known, seen)
            self._track(a, state, known, seen)
            for broker_id in sorted({d.broker_id for d in a.offline.values()}):
                self._decide(a, broker_id)
            self.store.save({**a.kept_unknown, **a.offline})
        return a

    def _read_answers(self, a: DirAssessment, state: ClusterState, seen: dict[int, dict]) -> None:
        """Live brokers whose answer is unknown are named once each: unknown, never healthy."""
        for broker_id, report in sorted(seen.items()):
            if report["state"] == UNKNOWN and state.is_available(broker_id):
                a.unknown[broker_id] = report["reason"]
                a.records.append(
                    self._record(
                        "log dir tracking",
                        "log dirs unknown",
                        f"broker {broker_id} is live but its DescribeLogDirs answer is unknown "
                        f"({report['reason']}): not healthy, and never a reason to move anything",
                        subject=f"broker {broker_id}",
                        level=logging.WARNING,
                    )
                )
            elif report["state"] == OFFLINE and state.is_available(broker_id):
                a.replicas[broker_id] = list(report["partitions"])
                if not report["offline_dirs"]:
                    a.records.append(self._no_dir_to_count(broker_id, report))

    def _no_dir_to_count(self, broker_id: int, report: dict[str, Any]) -> decisions.DecisionRecord:
        """The controller names replicas of a live broker offline while its own answer has no offline
        dir: offline (the cluster's word), but no failed dir to count down, so nothing starts here."""
        return self._record(
            "log dir tracking",
            "offline replicas without an offline dir",
            f"the controller names {len(report['partitions'])} replica(s) of live broker {broker_id} offline "
            "while its DescribeLogDirs answer lists no offline dir: they are offline (the cluster's own "
            "word), but no failed dir is counted down and nothing is started for them; "
            f"kafka_log_dir_failure with broker_id {broker_id} moves them",
            subject=f"broker {broker_id}",
            observed={
                "partitions": report["partitions"][:MAX_LISTED],
                "disagreements": dict(list(report.get("disagreements", {}).items())[:MAX_LISTED]),
            },
            level=logging.WARNING,
        )

    def _forget_or_keep(
        self, a: DirAssessment, state: ClusterState, known: dict[str, OfflineDir], seen: dict[int, dict]
    ) -> None:
        """A remembered dir that is not offline now: forgotten when the broker answered (online again)
        or is down (the heal's case), kept when its live broker's answer is unknown."""
        for k, entry in sorted(known.items()):
            report = seen.get(entry.broker_id, {})
            offline = {d["path"] for d in report.get("offline_dirs", ())}
            down = entry.broker_id not in state.brokers or not state.is_available(entry.broker_id)
            if not down and entry.log_dir in offline:
                continue
            if not down and entry.broker_id in a.unknown:
                a.kept_unknown[k] = entry
                continue
            a.recovered.append(k)
            why = (
                f"broker {entry.broker_id} is down, fenced or unregistered: every replica on it is out, the "
                "failed-broker heal's case; a dir still offline when it is back counts from then"
                if down
                else f"broker {entry.broker_id} answers log dir {entry.log_dir} online again (or no longer lists "
                "it): a replaced disk or a restarted broker; nothing is started for it"
            )
            a.records.append(
                self._record(
                    "log dir tracking",
                    "forget the offline log dir",
                    why,
                    subject=f"broker {entry.broker_id} log dir {entry.log_dir}",
                    observed={"first_seen_ms": entry.first_seen_ms, "down": down},
                )
            )

    def _track(
        self, a: DirAssessment, state: ClusterState, known: dict[str, OfflineDir], seen: dict[int, dict]
    ) -> None:
        """Each dir offline in a live broker's answer: the remembered entry, or a new countdown."""
        for broker_id, report in sorted(seen.items()):
            if report["state"] != OFFLINE or not state.is_available(broker_id):
                continue  # a fenced broker that still answers is the heal's case
            for d in report["offline_dirs"]:
                key = f"{broker_id}:{d['path']}"
                entry = known.get(key)
                if entry is None:
                    entry = OfflineDir(broker_id, d["path"], first_seen_ms=a.now_ms, error=d["error"])
                    a.records.append(self._countdown(entry, report))
                a.offline[key] = entry

    def _countdown(self, entry: OfflineDir, report: dict[str, Any]) -> decisions.DecisionRecord:
        return self._record(
            "log dir tracking",
            "start the countdown",
            f"live broker {entry.broker_id} answers log dir {entry.log_dir} with {entry.error}; "
            f"{len(report['partitions'])} of its replica(s) sat in its offline dir(s) "
            f"({report.get('decided_by', '')})",
            subject=f"broker {entry.broker_id} log dir {entry.log_dir}",
            observed={
                "first_seen_ms": entry.first_seen_ms,
                "failure_threshold_s": self.thresholds.failure_threshold_s,
                "partitions": report["partitions"][:MAX_LISTED],
                "metadata_offline": report.get("metadata_offline", [])[:MAX_LISTED],
                "disagreements": dict(list(report.get("disagreements", {}).items())[:MAX_LISTED]),
            },
        )

    def _decide(self, a: DirAssessment, broker_id: int) -> None:
        """One broker's offline dirs: alert when due, then wait, hold back, or add it to ``a.due``."""
        th, dirs = self.thresholds, a.dirs_of(broker_id)
        ages = {d.key: (a.now_ms - d.first_seen_ms) / 1000 for d in dirs}
        for d in dirs:
            if th.alert_after_s >= 0 and ages[d.key] >= th.alert_after_s:
                self._alert(a, d, ages[d.key])
        subject = f"broker {broker_id}"
        if not th.automation_on:
            a.records.append(
                self._record(
                    "log dir tracking",
                    "do not move",
                    "the failure threshold is -1: automation is off",
                    subject=subject,
                )
            )
            return
        youngest = min(ages.values())
        if youngest < th.failure_threshold_s:
            why = (
                f"broker {broker_id}'s newest offline log dir was first seen {youngest:.0f}s ago; its replicas "
                f"may move after {th.failure_threshold_s:.0f}s if the dir stays offline"
            )
            a.records.append(self._record("log dir tracking", "wait", why, subject=subject))
            return
        if not a.replicas.get(broker_id):
            why = f"no replica of broker {broker_id} sat in its offline log dir(s): nothing to move (alert only)"
            a.records.append(self._record("log dir tracking", "nothing to move", why, subject=subject))
            return
        if self._stopped_on_purpose(a.records, dirs, subject, LOG_DIR_FAILURE_DAG_ID):
            return
        if self._started_recently(a, broker_id, dirs):
            return
        a.due.append(broker_id)

    def _alert(self, a: DirAssessment, d: OfflineDir, age_s: float) -> None:
        a.alerts.append(d.key)
        if d.alerted_ms is None:
            d.alerted_ms = a.now_ms
        replicas = a.replicas.get(d.broker_id, [])
        a.records.append(
            self._record(
                "log dir tracking",
                "alert",
                f"log dir {d.log_dir} of live broker {d.broker_id} offline ({d.error}) for {age_s:.0f}s "
                f"(alert after {self.thresholds.alert_after_s:.0f}s); {len(replicas)} replica(s) sat in its "
                "offline dir(s) and are out of sync on it",
                subject=f"broker {d.broker_id} log dir {d.log_dir}",
                observed={"first_seen_ms": d.first_seen_ms, "partitions": replicas[:MAX_LISTED]},
                level=logging.WARNING,
            )
        )

    def _started_recently(self, a: DirAssessment, broker_id: int, dirs: list[OfflineDir]) -> bool:
        """A run was started for this broker within ``retrigger_after`` (say, a rejected approval)."""
        last = max(
            (d for d in dirs if d.triggered_ms is not None), key=lambda d: d.triggered_ms, default=None
        )
        retrigger_s = self.thresholds.retrigger_s
        if last is None or a.now_ms - last.triggered_ms >= retrigger_s * 1000:
            return False
        a.records.append(
            self._record(
                "log dir tracking",
                f"do not start another {LOG_DIR_FAILURE_DAG_ID}",
                f"one was started for broker {broker_id} {(a.now_ms - last.triggered_ms) / 1000:.0f}s ago "
                f"(run {last.triggered_run_id}); the next may start {retrigger_s:.0f}s after it",
                subject=f"broker {broker_id}",
            )
        )
        return True

    def mark_triggered(self, broker_id: int, run_id: str) -> None:
        """Remember that a run was started for every offline dir of this broker."""
        self._mark_triggered_where(lambda _, entry: entry.broker_id == broker_id, run_id)


# ------------------------------------------------------------------ whether a run starts now


@dataclass(frozen=True)
class LogDirStart:
    """The run the sweep starts: one broker, its offline dirs, the replicas that sat in them."""

    broker_id: int
    offline_dirs: list[str]
    replicas: list[str]

    @property
    def log_dir(self) -> str | None:
        """The run's ``log_dir``: the dir when there is one (the run then acts on exactly what the
        sweep saw), else None: every offline dir (the runbook refuses one of several)."""
        return self.offline_dirs[0] if len(self.offline_dirs) == 1 else None

    def conf(self, kafka_config_id: str, passed_on: dict[str, Any]) -> dict[str, Any]:
        """The conf of the ``kafka_log_dir_failure`` run: the broker and dir, the sweep's chunk,
        throttle, gate and election settings (``passed_on``), a real run on every live receiver."""
        return {
            "broker_id": self.broker_id,
            "log_dir": self.log_dir,
            "mode": "move",
            "receivers": "all",
            **passed_on,
            "dry_run": False,
            "kafka_config_id": kafka_config_id,
        }

    def record(
        self, run_id: str, conf: dict[str, Any], threshold_s: float, logger=None
    ) -> decisions.DecisionRecord:
        """The start decision: what was seen, and the exact run and conf it starts."""
        return decisions.record(
            "sweep",
            f"start {LOG_DIR_FAILURE_DAG_ID}",
            f"log dir(s) {self.offline_dirs} of live broker {self.broker_id} offline for more than "
            f"{threshold_s:.0f}s; {len(self.replicas)} replica(s) sat in them; no broker failed and no "
            "reassignment running on the cluster",
            subject=f"broker {self.broker_id}",
            observed={"offline_dirs": self.offline_dirs, "replicas": self.replicas[:MAX_LISTED]},
            action=f"trigger {LOG_DIR_FAILURE_DAG_ID} run {run_id} with {conf}",
            logger=logger,
        )


def choose_log_dir_start(
    dirs: DirAssessment,
    failed_brokers: list[int],
    active: Callable[[], list[str]],
    enabled: bool,
    logger: logging.Logger | None = None,
) -> LogDirStart | None:
    """The broker whose log-dir run starts now, or None with a decision record (in ``dirs.records``)
    saying why not.

    ``failed_brokers``: what the failed-broker tracker tracks now (failed at all, before or after its
    threshold). ``active``: the reassignment runs on the cluster (read only when it matters).
    ``enabled``: the sweep's setting (off by default: alert only)."""
    if not dirs.due:
        return None
    held = _held_back(dirs.due, failed_brokers, active, enabled)
    if held is not None:
        decision, why, level = held
        dirs.records.append(
            decisions.record(
                "sweep", decision, why, subject=f"brokers {dirs.due}", logger=logger, level=level
            )
        )
        return None
    broker = dirs.due[0]
    if len(dirs.due) > 1:
        why = f"one reassignment per cluster at a time: broker {broker} first, the others at a later sweep"
        dirs.records.append(
            decisions.record("sweep", "wait", why, subject=f"brokers {dirs.due[1:]}", logger=logger)
        )
    return LogDirStart(
        broker_id=broker,
        offline_dirs=[d.log_dir for d in dirs.dirs_of(broker)],
        replicas=list(dirs.replicas.get(broker, [])),
    )


def _held_back(
    due: list[int], failed_brokers: list[int], active: Callable[[], list[str]], enabled: bool
) -> tuple[str, str, int] | None:
    """(decision, reason, level) when no log-dir run may start now, in this order: the setting is off
    (alert only); a broker is failed (the dead broker's heal goes first: every replica on it is out,
    not one dir's, and both runs would use the same receivers); a reassignment runs on the cluster."""
    if not enabled:
        return (
            "alert only",
            "start_log_dir_failure is off (the default): the sweep alerts only; start kafka_log_dir_failure "
            f"with broker_id {due[0]} by hand, or turn the setting on",
            logging.WARNING,
        )
    if failed_brokers:
        return (
            "the dead broker's heal goes first",
            f"broker(s) {failed_brokers} are failed (down or fenced: kafka_failed_broker_reassignment's case) "
            f"while live broker(s) {due} lost a log dir: the dead broker's heal goes first (every replica on "
            "it is out, not one dir's, and both runs would use the same receivers); the log-dir run starts at "
            "a sweep that sees no failed broker and no reassignment running",
            logging.INFO,
        )
    running = active()
    if running:
        return (
            f"do not start {LOG_DIR_FAILURE_DAG_ID}",
            f"run(s) {running} are already active on the cluster; one reassignment per cluster at a time",
            logging.INFO,
        )
    return None
