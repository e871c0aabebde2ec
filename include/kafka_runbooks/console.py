"""The Kafka page of the Airflow UI: what it shows, read from the runbooks' own artifacts,
rendered as one self-contained HTML page (inline SVG charts, no script or style from a
CDN: the people who open it often have no internet either).

What Airflow knows (runs in progress, gates waiting) is passed in by the plugin
(``kafka_runbooks_airflow.console_app``) as plain dicts; everything else comes from
the data store (:mod:`kafka_runbooks.storage`): the latest health report per Kafka connection, the
progress files of running reassignments and restarts, and the decision journal.
Nothing here imports Airflow, so the page is tested without a web server.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decision_journal, storage
from kafka_runbooks.console_states import BrokerStates, with_broker_states
from kafka_runbooks.evidence import NOT_CAUGHT_UP, UNKNOWN, CatchUp, QuorumView
from kafka_runbooks.failed_broker import REASSIGNING_DAG_IDS
from kafka_runbooks.fleet import config_id_of
from kafka_runbooks.model import Broker, ClusterState, Quorum, QuorumMember
from kafka_runbooks.paths import safe_name
from kafka_runbooks.units import format_size

if TYPE_CHECKING:
    from kafka_runbooks.admin import ClusterAdmin

COUNTS = (
    ("offline", "Offline", "no leader: clients of these partitions are down"),
    ("under_min_isr", "Under min ISR", "acks=all producers are rejected"),
    ("at_min_isr", "At min ISR", "one more lost replica stops acks=all writes"),
    ("under_replicated", "Under-replicated (URP)", "redundancy reduced"),
    (
        "min_isr_unknown",
        "Min ISR unknown",
        "min.insync.replicas not read: the min-ISR counts leave these out",
    ),
)
# read when the page loads only (the health report has its own quorum and log-dir sections)
LIVE_ONLY_COUNTS = (
    (
        "voters_not_caught_up",
        "Voters not caught up",
        "by the quorum leader's clock and the cluster's fetch timeout",
    ),
    ("voters_unknown", "Voters' catch-up unknown", "the leader's answer lacks the times to judge them"),
    ("offline_dirs", "Offline log dirs", "a broker's own DescribeLogDirs answer: their replicas are offline"),
    (
        "in_log_recovery",
        "Brokers in log recovery",
        "the broker's own BrokerState and recovery gauges (its probe)",
    ),
)

# a tile that says "0 unknown" would only be noise
SHOWN_WHEN_ANY = {
    "min_isr_unknown",
    "voters_unknown",
    "voters_not_caught_up",
    "offline_dirs",
    "in_log_recovery",
}
BAD_WHEN_ANY = {"offline", "under_min_isr", "voters_not_caught_up", "offline_dirs", "in_log_recovery"}


# ------------------------------------------------------------------ reading the artifacts


def health_reports(root: Path | None = None) -> list[dict[str, Any]]:
    """The latest health report of each Kafka connection (the newest single report if none is per connection)."""
    store = _store(root)
    reports = []
    for key in store.list("reports/cluster_health/by_connection"):
        if not key.endswith(".json"):
            continue
        report = _read_json(store, key)
        if report is not None:
            report["kafka_config_id"] = config_id_of(report, key.rsplit("/", 1)[-1][: -len(".json")])
            reports.append(report)
    if not reports:
        latest = _read_json(store, "reports/cluster_health/latest.json")
        if latest is not None:
            latest["kafka_config_id"] = config_id_of(latest, "(latest report)")
            reports.append(latest)
    return reports


def run_progress(dag_id: str, run_id: str, root: Path | None = None) -> dict[str, Any] | None:
    """What a running runbook has done so far, from its own state files (None if it wrote none)."""
    store = _store(root)
    if dag_id in REASSIGNING_DAG_IDS:  # the chunked executor's
        folder = f"reassign/{safe_name(dag_id)}/{safe_name(run_id)}"
        progress = _read_json(store, f"{folder}/progress.json") or _read_json(
            store, f"{folder}/adopt-progress.json"
        )
        if progress and progress.get("chunks") != 0:  # none adopted: no progress yet ("all 0 chunk(s) done")
            return {"kind": "reassignment", **progress}
        return None
    if dag_id == "kafka_broker_restart":
        state = _read_json(store, f"restart/{safe_name(dag_id)}/{safe_name(run_id)}/roll-state.json")
        if not state:
            return None
        nodes = state.get("nodes", {})
        done = [n for n, s in nodes.items() if s.get("phase") == "done"]
        current = next(
            (n for n in state.get("order", []) if nodes.get(str(n), {}).get("phase") != "done"), None
        )
        phase = nodes.get(str(current), {}).get("phase") if current is not None else None
        line = f"{len(done)} of {len(nodes)} node(s) done" + (
            f" | node {current}: {phase}" if current is not None else ""
        )
        return {"kind": "restart", "line": line, "percent_partitions": None, "nodes_done": len(done)}
    return None


def _store(root: Path | None) -> storage.Store:
    """A given local folder (tests), else the configured data store."""
    return storage.Store(str(root)) if root else storage.store()


def _read_json(store: storage.Store, key: str) -> dict[str, Any] | None:
    try:
        value = json.loads(store.read_text(key) or "null")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------ live state (read when the page loads)

LIVE_DEADLINE_S = 4.0  # a page load waits at most this long for a cluster's answer
LIVE_CACHE_S = 5.0  # a cluster is read at most once per this many seconds, however many pages load


def read_live(admin: ClusterAdmin, states: BrokerStates | None = None) -> dict[str, Any]:
    """What the cluster says now: brokers, the quorum and the partition counts, read-only
    through the admin facade (DescribeCluster v2 lists fenced brokers, DescribeQuorum,
    DescribeTopicPartitions with each topic's min ISR); with ``states``, what each broker not
    serving says of itself (its probe: log recovery and what is left). Without, nothing is said
    of it and no "in log recovery" count is given (not asked is not none)."""
    cluster_id = admin.ping()
    brokers = admin.describe_brokers()
    quorum = admin.describe_quorum()
    partitions = admin.describe_partitions()
    for p in partitions:  # a replica on a broker the cluster no longer registers
        for replica in p.replicas:
            brokers.setdefault(replica, Broker(broker_id=replica, alive=False))
    state = ClusterState(cluster_id=cluster_id, brokers=brokers, quorum=quorum, partitions=partitions)
    shown = [_live_broker(b, metadata_fetching(quorum, n)) for n, b in sorted(brokers.items())]
    _with_offline_dirs(admin, shown)
    recovering = None if states is None else with_broker_states(shown, states)  # None: unknown
    view = quorum_view(quorum)
    live = {
        "cluster_id": cluster_id,
        "brokers": shown,
        "quorum": view,
        "partitions": len(partitions),
        "counts": {
            "offline": len(state.offline()),
            "under_min_isr": len(state.under_min_isr()),
            "under_replicated": len(state.under_replicated()),
            "min_isr_unknown": len(_online(state, state.min_isr_unknown())),
            "voters_not_caught_up": sum(v["state"] == NOT_CAUGHT_UP for v in view["voters"]),
            "voters_unknown": sum(v["state"] == UNKNOWN for v in view["voters"]),
            "offline_dirs": sum(len(b.get("offline_dirs") or ()) for b in shown),
        },
    }
    if recovering is not None:
        live["counts"]["in_log_recovery"] = recovering
    return live


def _with_offline_dirs(admin: ClusterAdmin, shown: list[dict[str, Any]]) -> None:
    """Each broker that serves now (fetching by the quorum leader's clock) asked for its log dirs
    alone (DescribeLogDirs for no topic): an offline dir is shown live, beside "up", instead of only
    as under-replicated partitions until the next health report. A broker not serving is not asked
    (a frozen one would hold the page); one that does not answer, or a refusal, is said so."""
    serving = [b["broker_id"] for b in shown if b["state"] == "up"]
    try:
        states, errors = admin.describe_log_dir_states(serving, replicas=False) if serving else ({}, {})
    except Exception as exc:  # noqa: BLE001 - e.g. no DESCRIBE on the cluster: dirs unknown, page shown
        states, errors = {}, dict.fromkeys(serving, f"{type(exc).__name__}: {exc}")
    for b in shown:
        if b["broker_id"] in states:
            b["offline_dirs"] = sorted(d.path for d in states[b["broker_id"]] if not d.online)
            if b["offline_dirs"]:
                b["state"] = f"up; log dir(s) OFFLINE: {', '.join(b['offline_dirs'])}"
        elif b["broker_id"] in errors:
            b["offline_dirs"] = None
            b["state"] += f"; log dirs unknown ({errors[b['broker_id']]})"


def _online(state: ClusterState, partitions: list) -> list:
    """Those of ``partitions`` that have a live leader (an offline one is counted as offline only)."""
    offline = {p.name for p in state.offline()}
    return [p for p in partitions if p.name not in offline]


def metadata_fetching(quorum: Quorum, node_id: int) -> CatchUp | None:
    """What the quorum leader's answer says of ``node_id``'s metadata fetches, judged by the evidence
    room (its clock on both sides, the cluster's fetch timeout); None when the answer lists it
    neither as voter nor as observer. A combined node fetches as a voter, a broker as an observer."""
    return QuorumView(quorum).fetching(node_id)


def _live_broker(b: Broker, fetching: CatchUp | None) -> dict[str, Any]:
    """A broker as the page shows it. Registered and unfenced is "up" only while the quorum leader
    sees it fetching the metadata log: a broker that died without a controlled shutdown stays
    registered and unfenced until its session times out, and stops fetching at once."""
    fetch_ms_ago = None if fetching is None else fetching.fetch_ms_ago
    if not b.available:
        state = "fenced" if b.alive else "not registered"
    elif fetching is None or fetching.state == UNKNOWN:
        state = "registered, metadata fetch unknown"
    elif fetching.state == NOT_CAUGHT_UP:
        state = (
            f"registered, no metadata fetch for {fetch_ms_ago / 1000:.0f} s (controller's clock)"
            if fetching.silent
            else f"registered, {fetching.why}"
        )
    else:
        state = "up"
    return {
        "broker_id": b.broker_id,
        "rack": b.rack,
        "registered": b.alive,
        "fenced": b.alive and not b.available,
        "metadata_fetch_ms_ago": fetch_ms_ago,
        "state": state,
    }


def quorum_view(quorum: Quorum) -> dict[str, Any]:
    """The quorum as the page shows it. A voter's lag is read in the answer's own terms only:
    offsets (the leader's log end offset minus the voter's) and time by the leader's own clock
    (``Quorum.lag_ms``); never against this machine's clock. Unknown stays None."""
    leader = quorum.leader
    leader_end = leader.log_end_offset if leader and leader.log_end_offset >= 0 else None
    judged = QuorumView(quorum).voters()

    def lag(v: QuorumMember) -> dict[str, Any]:
        """One quorum member's row: its log end offset and lag behind the leader (None when either is
        unknown) and how long since the leader saw it caught up."""
        offsets = (
            None if leader_end is None or v.log_end_offset < 0 else max(0, leader_end - v.log_end_offset)
        )
        return {
            "node_id": v.node_id,
            "host": quorum.hosts.get(v.node_id),
            "leader": v.node_id == quorum.leader_id,
            "log_end_offset": v.log_end_offset if v.log_end_offset >= 0 else None,
            "lag_offsets": offsets,
            "caught_up_ms_ago": judged[v.node_id].caught_up_ms_ago,
            "fetch_ms_ago": judged[v.node_id].fetch_ms_ago,
            "state": judged[v.node_id].state,
            "why": judged[v.node_id].why,
        }

    return {
        "leader_id": quorum.leader_id if quorum.leader_id >= 0 else None,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "voters": [lag(v) for v in quorum.voters],
        "observers": sorted(o.node_id for o in quorum.observers),
    }


class LiveReader:
    """Reads each cluster at most once per ``cache_s`` and never keeps a page waiting longer
    than ``deadline_s``: the reads run in their own threads, a page takes what answered in
    time and says "not read within N s" for the rest (that read goes on and fills the cache
    for the next load; a second read of the same cluster is never started meanwhile). Each read
    has its own daemon thread: a read of a cluster that does not answer never holds up the
    process's exit (a pool's threads are joined at exit), and a fleet's clusters are read side by
    side, at most one read each."""

    def __init__(
        self,
        open_admin: Callable[[str], ClusterAdmin],
        deadline_s: float = LIVE_DEADLINE_S,
        cache_s: float = LIVE_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
        open_probe: Callable[[str], BrokerStates] | None = None,
    ) -> None:
        self.open_admin, self.deadline_s, self.cache_s, self.clock = open_admin, deadline_s, cache_s, clock
        self.open_probe = open_probe  # a cluster's broker-state probe (or why none), for brokers not serving
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._inflight: dict[str, Future] = {}

    def read(self, conn_ids: list[str]) -> list[dict[str, Any]]:
        """One answer per connection, in the given order, within the deadline."""
        pending = {c: self._start(c) for c in conn_ids}
        end = self.clock() + self.deadline_s
        out = []
        for conn_id, got in pending.items():
            if isinstance(got, dict):
                out.append(got)
                continue
            try:
                out.append(got.result(timeout=max(0.0, end - self.clock())))
            except FutureTimeout:
                out.append(_unread(conn_id, f"the cluster did not answer within {self.deadline_s:g} s"))
        return out

    def _start(self, conn_id: str) -> dict[str, Any] | Future:
        with self._lock:
            cached = self._cache.get(conn_id)
            if cached and self.clock() - cached[0] < self.cache_s:
                return cached[1]
            if conn_id not in self._inflight:
                future: Future = Future()
                self._inflight[conn_id] = future
                threading.Thread(
                    target=self._read_into,
                    args=(conn_id, future),
                    name=f"kafka-console-live-{conn_id}",
                    daemon=True,
                ).start()
            return self._inflight[conn_id]

    def _read_into(self, conn_id: str, future: Future) -> None:
        try:
            future.set_result(self._read_one(conn_id))
        except BaseException as exc:  # never a read left in flight for good: the next load starts one
            with self._lock:
                self._inflight.pop(conn_id, None)
            future.set_exception(exc)

    def _read_one(self, conn_id: str) -> dict[str, Any]:
        started = self.clock()
        try:
            states = self.open_probe(conn_id) if self.open_probe else None
            with self.open_admin(conn_id) as admin:
                view = {"kafka_config_id": conn_id, "error": None, **read_live(admin, states)}
        except Exception as exc:  # the one place a cluster's read failure becomes the page's reason
            view = _unread(conn_id, f"{type(exc).__name__}: {exc}")
        view["read_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            self._cache[conn_id] = (started, view)
            self._inflight.pop(conn_id, None)
        return view


def _unread(conn_id: str, reason: str) -> dict[str, Any]:
    return {"kafka_config_id": conn_id, "error": reason, "read_at": None}


# ------------------------------------------------------------------ each run's true state

# task states in which a task works, or will without anyone's help (Airflow's names)
ACTING_TASK_STATES = frozenset(
    {"running", "queued", "scheduled", "deferred", "up_for_reschedule", "up_for_retry", "restarting"}
)
ANYONE_MAY_ANSWER = "any user allowed to answer this DAG's approvals (no approvers named)"


def run_status(run: dict[str, Any], gates: list[dict[str, Any]]) -> tuple[str, str]:
    """(status, why) of a run from what Airflow knows: its state, its DAG's pause flag and its
    task instances' states; a run's own progress file never decides it (a restart wrote
    "node 1: wait_ready" before its gate was answered)."""
    state, paused, tasks = run["state"], bool(run.get("dag_paused")), run.get("tasks") or {}
    if state == "queued":
        if paused:
            return (
                "queued-because-paused",
                "its DAG is paused: Airflow starts no run of it until it is unpaused",
            )
        return "queued", "waiting for the scheduler to start it"
    if state == "running":
        return _running_status(run, paused, tasks, gates)
    if state == "failed":
        return _ended_status(run, tasks)
    if state == "success":
        return "succeeded", run.get("outcome") or "ended without a decision record of its own"
    return str(state), ""


def _running_status(
    run: dict[str, Any], paused: bool, tasks: dict[str, str], gates: list[dict[str, Any]]
) -> tuple[str, str]:
    waiting = sorted(t for t, s in tasks.items() if s == "awaiting_input")
    if waiting:
        gate = next((g for g in gates if g["run_id"] == run["run_id"] and g["dag_id"] == run["dag_id"]), {})
        return "waiting-at-gate", f"{', '.join(waiting)} waits for an answer from {who_may_answer(gate)}"
    working = sorted(t for t, s in tasks.items() if s == "running")
    if paused and not working:
        return "paused-mid-run", "its DAG was paused while it ran: no task runs until the DAG is unpaused"
    if paused:
        return "acting", f"{', '.join(working)} running; its DAG is paused: no further task will start"
    busy = sorted(t for t, s in tasks.items() if s in ACTING_TASK_STATES)
    return "acting", (f"{', '.join(busy)} " + ("running" if working else "in progress")) if busy else ""


def _ended_status(run: dict[str, Any], tasks: dict[str, str]) -> tuple[str, str]:
    reason = run.get("reason") or ""
    progress = run.get("progress") or {}
    if progress.get("stopped") or "stopped by" in reason:
        return "stopped", str(progress.get("stopped") or reason)
    failed = sorted(t for t, s in tasks.items() if s == "failed")
    if reason:
        return "failed", reason
    return "failed", f"task(s) failed: {', '.join(failed)}" if failed else "reason not recorded"


def who_may_answer(gate: dict[str, Any]) -> str:
    """The gate's assigned users (Airflow's HITL assignees, from KAFKA_RUNBOOKS_APPROVERS), by name."""
    users = gate.get("assignees") or []
    names = [str(u.get("name") or u.get("id")) for u in users if isinstance(u, dict)]
    return ", ".join(names) if names else ANYONE_MAY_ANSWER


def failure_record(dag_id: str, run_id: str, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest ERROR decision of a run in the journal (newest first): what the page and a run's
    failure notification give as its reason."""
    for d in records:
        if d.get("dag_id") == dag_id and d.get("run_id") == run_id and d.get("level") == "ERROR":
            return d
    return None


def failure_reason(dag_id: str, run_id: str, records: list[dict[str, Any]]) -> str | None:
    """The newest ERROR decision of a run in the journal (newest first), as its prose line."""
    d = failure_record(dag_id, run_id, records)
    return None if d is None else f"{d.get('step')}: {d.get('decision')} because {d.get('reason')}"


def last_decision(dag_id: str, run_id: str, records: list[dict[str, Any]]) -> str | None:
    """The newest decision of a run in the journal (newest first), as its prose line: what a run
    that succeeded ended on (e.g. ``verify: healed because ...``)."""
    for d in records:
        if d.get("dag_id") == dag_id and d.get("run_id") == run_id:
            return f"{d.get('step')}: {d.get('decision')} because {d.get('reason')}"
    return None


def paused_with_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paused DAGs that hold queued or running runs: they wait where nobody looks."""
    held: dict[str, int] = {}
    for r in runs:
        if r.get("dag_paused") and r["state"] in ("queued", "running"):
            held[r["dag_id"]] = held.get(r["dag_id"], 0) + 1
    return [{"dag_id": d, "runs": n} for d, n in sorted(held.items())]


def overview(
    runs: list[dict],
    gates: list[dict],
    root: Path | None = None,
    decisions: int = 30,
    live: list[dict] | None = None,
    runs_not_shown: dict | None = None,
) -> dict:
    """Everything the page shows, as JSON (the page's API returns exactly this). ``live``: what
    each cluster of the fleet answered when the page loaded (``LiveReader.read``);
    ``runs_not_shown``: how many queued or running runs the list could not hold, and where
    Airflow lists them all (empty when it holds every one)."""
    journal_file = (root / "decisions" / "journal.jsonl") if root else None
    # a finished run's reason or outcome is its last (ERROR) decision: look further back only when
    # one is shown (on an object store every record is one object to read)
    ended = any(r["state"] in ("failed", "success") for r in runs)
    records = decision_journal.last(max(decisions, 500) if ended else decisions, journal_file)
    for run in runs:
        _judge(run, gates, records, root)
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "live": live or [],
        "health": [_with_age(r) for r in health_reports(root)],
        "runs": runs,
        "runs_not_shown": runs_not_shown or {},
        "gates": [{**g, "who_may_answer": who_may_answer(g)} for g in gates],
        "paused_with_runs": paused_with_runs(runs),
        "alerts": alert_records(records),
        "decisions": records[:decisions],
    }


ALERTS_SHOWN = 20


def alert_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The alert intake's newest decisions (step ``alert``, newest first): each alert Alertmanager
    posted, and the run it started, was covered by, or why none (``kafka_alert_intake``)."""
    return [r for r in records if r.get("step") == "alert"][:ALERTS_SHOWN]


def _with_age(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its age in seconds: this server's clock against the time the report's own
    worker stamped it (both our machines' clocks, never a broker's), None when it has no time."""
    taken = report.get("taken_at_ms")
    report["age_s"] = max(0, int(time.time() - taken / 1000)) if isinstance(taken, (int, float)) else None
    return report


def _age(age_s: Any) -> str:
    if age_s is None:
        return ", age unknown"
    if age_s < 120:
        return f", {age_s} s old"
    return f", {age_s // 60} min old" if age_s < 7200 else f", {age_s // 3600} h old"


def _judge(run: dict[str, Any], gates: list[dict], records: list[dict], root: Path | None) -> None:
    """Set the run's status and why; its progress only while it really acts (or its final
    line once stopped): a run at its gate or frozen by a pause shows none."""
    progress = run_progress(run["dag_id"], run["run_id"], root)
    if run["state"] == "failed":
        run["reason"] = failure_reason(run["dag_id"], run["run_id"], records)
    if run["state"] == "success":
        run["outcome"] = last_decision(run["dag_id"], run["run_id"], records)
    run["progress"] = progress
    run["status"], run["why"] = run_status(run, gates)
    if run["status"] not in ("acting", "stopped"):
        run["progress"] = None


# ------------------------------------------------------------------ rendering

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1f2933;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d9e2ec}
h3{font-size:14px;margin:12px 0 6px} .muted{color:#627d98;font-size:12px}
.tiles{display:flex;gap:8px;flex-wrap:wrap} .tile{border:1px solid #d9e2ec;border-radius:6px;padding:8px 12px;min-width:140px}
.tile b{font-size:22px;display:block} .bad{border-color:#e12d39;background:#ffe3e3} .ok{background:#e3f9e5}
.warn{border-color:#f0b429;background:#fffbea} .stale{background:#f0f4f8;color:#627d98}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #d9e2ec;padding:4px 8px;text-align:left}
th{background:#f0f4f8} .bar{background:#d9e2ec;border-radius:3px;width:200px;height:10px;display:inline-block}
.bar i{display:block;height:10px;border-radius:3px;background:#2186eb}
a{color:#0b69a3} svg text{font-size:11px;fill:#334e68}
"""


# Airflow shows plugin pages in a sandboxed frame that may not navigate the window itself;
# a link of the page is followed by an anchor of the (same-origin) UI document instead.
OPEN_IN_UI = """
document.addEventListener('click', function (e) {
  var a = e.target.closest ? e.target.closest('a[data-ui]') : null;
  if (!a || window.top === window) return;
  e.preventDefault();
  try {
    var doc = window.top.document, link = doc.createElement('a');
    link.href = a.href; link.style.display = 'none'; doc.body.appendChild(link); link.click(); link.remove();
  } catch (err) { window.location.href = a.href; }
});
"""


def render_page(view: dict[str, Any], refresh_s: int = 15) -> str:
    """The whole page (refreshes itself every ``refresh_s`` seconds)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<meta http-equiv='refresh' content='{int(refresh_s)}'>",
        f"<title>Kafka</title><style>{STYLE}</style></head><body>",
        "<h1>Kafka</h1>",
        f"<div class='muted'>As of {_e(view['generated_at'])}; refreshes every {int(refresh_s)} s. "
        "Read from the clusters (live, read-only), the runbooks' artifacts and Airflow; nothing on this "
        "page changes the cluster.</div>",
        _paused(view.get("paused_with_runs") or []),
        _gates(view["gates"]),
        _runs(view["runs"], view.get("runs_not_shown") or {}),
        _alerts(view.get("alerts") or []),
        "<h2>Clusters now</h2>",
        *[_live(c) for c in view.get("live") or []],
        "<h2>Cluster health (last full report)</h2>",
    ]
    if not view["health"]:
        parts.append("<p id='no-health'>No health report yet: run <code>kafka_cluster_health</code>.</p>")
    live_read = {c.get("kafka_config_id") for c in view.get("live") or [] if not c.get("error")}
    parts += [_health(report, config_id_of(report, "?") in live_read) for report in view["health"]]
    parts.append(_decisions(view["decisions"]))
    parts.append(f"<script>{OPEN_IN_UI}</script></body></html>")
    return "".join(parts)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _live(cluster: dict[str, Any]) -> str:
    """One cluster as it answered when the page loaded, or why it could not be read."""
    conn = cluster.get("kafka_config_id") or "?"
    head = f"<section class='live' data-conn='{_e(conn)}'><h3>Connection <code>{_e(conn)}</code> "
    if cluster.get("error"):
        return head + f"</h3><p class='unread tile bad'>Cannot be read: {_e(cluster['error'])}</p></section>"
    counts = cluster.get("counts", {})
    tiles = []
    for key, label, why in COUNTS + LIVE_ONLY_COUNTS:
        if key not in counts:
            continue
        n = counts[key]
        if key in SHOWN_WHEN_ANY and not n:
            continue
        cls = "bad" if n and key in BAD_WHEN_ANY else "warn" if n else "ok"
        tiles.append(
            f"<div class='tile {cls}' data-live-count='{key}' title='{_e(why)}'><b>{n}</b>{_e(label)}</div>"
        )
    return (
        head
        + f"<span class='muted'>cluster {_e(cluster.get('cluster_id'))}, {_e(cluster.get('partitions'))} "
        f"partitions, read at {_e(cluster.get('read_at'))}</span></h3>"
        f"<div class='tiles'>{''.join(tiles)}</div>{_pending_restores(cluster.get('pending_restores'))}"
        f"{_live_brokers(cluster.get('brokers', []))}"
        f"{_quorum(cluster.get('quorum') or {})}</section>"
    )


def _pending_restores(pending: list[str] | str | None) -> str:
    """Replica orders an unclean recovery changed and did not put back (its run died between
    the reorder and the restore): the next run of the runbook restores them first."""
    if not pending:
        return ""
    if isinstance(pending, str):
        return f"<p class='tile warn' data-pending-restores='unknown'>Replica orders left changed: {_e(pending)}</p>"
    return (
        f"<p class='tile warn' data-pending-restores='{len(pending)}'>{len(pending)} replica order(s) left "
        f"changed by an unclean recovery ({_e(', '.join(pending[:20]))}): the next "
        "<code>kafka_unclean_recovery</code> run on this cluster restores them first</p>"
    )


def _live_brokers(brokers: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr data-live-broker='{_e(b['broker_id'])}'><td>{_e(b['broker_id'])}</td><td>{_e(b.get('rack') or '-')}</td>"
        f"<td class='state{'' if b['state'] == 'up' else ' bad'}'>{_e(b['state'])}</td></tr>"
        for b in brokers
    )
    return f"<table class='live-brokers'><tr><th>broker</th><th>rack</th><th>state</th></tr>{rows}</table>"


def _quorum(q: dict[str, Any]) -> str:
    """Voters with their lag in the quorum leader's own terms (offsets, the leader's clock)."""

    def ago(ms: Any) -> str:
        """Milliseconds as seconds for the console, ``unknown`` when not known."""
        return "unknown" if ms is None else f"{ms / 1000:.1f} s"

    rows = "".join(
        f"<tr data-voter='{_e(v['node_id'])}'><td>{_e(v['node_id'])}{' (leader)' if v['leader'] else ''}</td>"
        f"<td>{_e(v.get('host') or '-')}</td><td>{_e('unknown' if v['lag_offsets'] is None else v['lag_offsets'])}</td>"
        f"<td>{_e(ago(v.get('fetch_ms_ago')))}</td><td>{_e(ago(v['caught_up_ms_ago']))}</td>"
        f"<td class='voter-state{'' if v.get('state') == 'caught up' else ' bad'}' data-voter-state="
        f"'{_e(v.get('state'))}' title='{_e(v.get('why'))}'>{_e(v.get('state'))}</td></tr>"
        for v in q.get("voters", [])
    )
    leader = "none" if q.get("leader_id") is None else q["leader_id"]
    return (
        f"<p class='quorum'>Quorum leader: <b data-quorum-leader='{_e(leader)}'>{_e(leader)}</b> "
        f"(epoch {_e(q.get('leader_epoch'))}, high watermark {_e(q.get('high_watermark'))})</p>"
        "<table class='voters'><tr><th>controller (voter)</th><th>host</th><th>behind the leader (offsets)</th>"
        "<th>last fetch (leader's clock)</th><th>last caught up (leader's clock)</th><th>judged</th></tr>"
        f"{rows}</table>"
    )


def _paused(held: list[dict[str, Any]]) -> str:
    """A warning per paused DAG that holds runs (empty when none: nothing to flag)."""
    if not held:
        return ""
    items = "".join(
        f"<li data-paused-dag='{_e(h['dag_id'])}'><code>{_e(h['dag_id'])}</code> is paused with {h['runs']} run(s) "
        "in it: they do not move until it is unpaused</li>"
        for h in held
    )
    return f"<div class='tile warn' id='paused-with-runs'><ul>{items}</ul></div>"


def _health(report: dict[str, Any], live_read: bool = False) -> str:
    """One connection's last health report, with its age. ``live_read``: the page also read that
    cluster now, so the report is outranked: its green tiles turn grey (stale), never green beside a
    live red fact, and it says that the live read above is newer."""
    conn = config_id_of(report, "?")
    counts = report.get("counts", {})
    taken = report.get("taken_at_ms")
    when = datetime.fromtimestamp(taken / 1000, timezone.utc).isoformat(timespec="seconds") if taken else "?"
    tiles = []
    for key, label, why in COUNTS:
        n = int(counts.get(key, 0) or 0)
        if key in SHOWN_WHEN_ANY and not n:
            continue
        cls = "bad" if n and key in BAD_WHEN_ANY else "warn" if n else "ok"
        tiles.append(
            f"<div class='tile {cls}' data-count='{key}' title='{_e(why)}'><b>{n}</b>{_e(label)}</div>"
        )
    brokers = report.get("brokers", [])
    section = _health_section(report, conn, when, tiles, brokers)
    if not live_read:
        return section
    outranked = (
        f"<p class='outranked muted'>Report of {_e(when)}{_age(report.get('age_s'))}: the live read of this "
        "connection above is newer and outranks it; its tiles are grey (stale), not green.</p>"
    )
    return section.replace("class='tile ok", "class='tile stale").replace("</h3>", "</h3>" + outranked, 1)


def _health_section(report: dict[str, Any], conn: str, when: str, tiles: list[str], brokers: list) -> str:
    """The report's HTML: its count tiles, then each of its sections."""
    return (
        f"<section class='health' data-conn='{_e(conn)}'><h3>Connection <code>{_e(conn)}</code> "
        f"<span class='muted'>cluster {_e(report.get('cluster_id'))}, {_e(report.get('partitions'))} partitions, "
        f"report of {_e(when)}{_age(report.get('age_s'))}</span></h3>"
        f"<div class='tiles'>{''.join(tiles)}</div>"
        + _health_balance(report.get("balance"), report.get("rebalance_proposal"))
        + _health_replication(report.get("replication"))
        + _health_quorum(report.get("quorum"))
        + _health_log_dirs(report.get("log_dirs"))
        + _health_features(report.get("features"))
        + _broker_chart(brokers)
        + _broker_table(brokers)
        + "</section>"
    )


def _health_balance(balance: dict[str, Any] | None, proposal: dict[str, Any] | None) -> str:
    """Replicas, preferred leaders and bytes per live broker against kafka_rebalance's target spreads:
    what is out and by how much, "unknown" with the brokers that make it so; then the sweep's proposal."""
    if not balance:
        return ""
    tiles = []
    for kind in ("replicas", "preferred_leaders", "leaders"):
        if kind == "leaders" and kind not in balance:
            continue  # a report from before leadership now was judged
        k = balance.get(kind) or {}
        state = k.get("state", "unknown")
        cls = {"balanced": "ok", "out of spread": "warn"}.get(state, "warn")
        label = "leaders now" if kind == "leaders" else kind.replace("_", " ")
        text = f"{label} per live broker: target {k.get('target')}"
        if state != "unknown":
            text += f" (at most {k.get('limit')}), spread {k.get('spread')}"
        if state == "out of spread" and kind == "leaders":
            text += f", over by {k.get('over_by')}: a preferred-leader election moves leadership back"
        elif state == "out of spread":
            text += f", over by {k.get('over_by')}: at least {k.get('moves_at_least')} move(s)"
        tiles.append(f"<div class='tile {cls}' data-balance='{_e(kind)}'><b>{_e(state)}</b>{_e(text)}</div>")
    if balance.get("bytes"):
        tiles.append(_bytes_tile(balance["bytes"]))
    unknown = balance.get("unknown_brokers") or {}
    if unknown:
        tiles.append(f"<div class='tile warn' data-balance-unknown><b>unknown</b>{_e(unknown)}</div>")
    if proposal and proposal.get("decision") != "nothing to propose":
        run = f" (run <code>{_e(proposal['run_id'])}</code>)" if proposal.get("start") else ""
        tiles.append(
            f"<div class='tile {'warn' if proposal.get('start') else 'muted'}' data-proposal>"
            f"<b>{_e(proposal.get('decision'))}</b>{_e(proposal.get('why'))}{run}</div>"
        )
    return f"<div class='tiles balance'>{''.join(tiles)}</div>"


def _bytes_tile(k: dict[str, Any]) -> str:
    """Bytes per live broker against ``max_bytes_spread_percent``: the limit, spread and excess in
    bytes, or "unknown" naming the brokers whose size nobody read (never balanced, never 0)."""
    state = k.get("state", "unknown")
    cls = "ok" if state == "balanced" else "warn"
    text = f"bytes per live broker: target {k.get('target')}% of the mean"
    if state != "unknown":
        text += f" (at most {format_size(k['limit'])}), spread {format_size(k['spread'])}"
    else:
        text += f"; unknown on broker(s) {', '.join(sorted(k.get('unknown_brokers') or {}, key=int)) or 'none live'}"
    if state == "out of spread":
        text += f", over by {format_size(k['over_by'])}: replica moves or swaps even it out"
    return f"<div class='tile {cls}' data-balance='bytes'><b>{_e(state)}</b>{_e(text)}</div>"


def _health_replication(rf: dict[str, Any] | None) -> str:
    """The topics below the minimum replication factor (and where the minimum comes from)."""
    if not rf:
        return ""
    n = int(rf.get("below_minimum") or 0)
    where = f"minimum {_e(rf.get('minimum'))} ({_e(rf.get('minimum_from'))})"
    if not n:
        return f"<p class='muted' data-below-min-rf='0'>No topic below replication factor: {where}.</p>"
    listed = ", ".join(f"{t['topic']} (RF {t['replication_factor']})" for t in rf.get("listed", [])[:50])
    more = " ..." if rf.get("truncated") or len(rf.get("listed", [])) > 50 else ""
    return (
        f"<div class='tile warn' data-below-min-rf='{n}'><b>{n}</b>topic(s) below replication factor, "
        f"{where}: {_e(listed)}{more}</div>"
    )


def _health_quorum(q: dict[str, Any] | None) -> str:
    """The report's quorum: whether it has a spare voter, and each voter's state (the leader's clock)."""
    if not q:
        return ""
    spare = q.get("has_spare")
    label, cls = {True: ("spare voter", "ok"), False: ("no spare voter", "bad")}.get(
        spare, ("spare unknown", "warn")
    )
    if q.get("error"):
        return (
            f"<div class='tile warn' data-quorum-spare='unknown'><b>quorum unknown</b>{_e(q['error'])}</div>"
        )
    voters = ", ".join(
        f"{v['node_id']}{' (leader)' if v.get('leader') else ''}: {v['state']}"
        + ("" if v.get("lag_offsets") is None else f", {v['lag_offsets']} behind")
        + (f", directory {v['directory_id']}" if v.get("directory_id") else "")
        for v in q.get("voters", [])
    )
    observers = ", ".join(str(o["node_id"]) for o in q.get("observers", [])) or "none"
    return (
        f"<div class='tile {cls}' data-quorum-spare='{_e(str(spare).lower())}'><b>{_e(label)}</b>"
        f"quorum leader {_e(q.get('leader_id'))} (epoch {_e(q.get('leader_epoch'))}); "
        f"{len(q.get('caught_up_voters', []))} of {len(q.get('voters', []))} voters caught up, "
        f"{_e(q.get('majority'))} needed</div><p class='quorum-voters muted'>Voters: {_e(voters)}. "
        f"Observers: {_e(observers)}.</p>"
    )


def _health_features(features: dict[str, Any] | None) -> str:
    """What the cluster finalized (ApiVersions): the features the runbooks ask before relying on one."""
    if not features:
        return ""
    if "finalized" not in features:
        return f"<p class='features muted' data-features='unknown'>Features: unknown ({_e(features.get('unknown'))}).</p>"
    finalized = ", ".join(f"{k} {v}" for k, v in features["finalized"].items()) or "none"
    elr = "kept" if features.get("elr") else "not kept (no record of clean replicas beyond the ISR)"
    quorum = "dynamic (voters can change)" if features.get("dynamic_quorum") else "static"
    return (
        f"<p class='features muted' data-features='read'>Features finalized: {_e(finalized)}. ELR {_e(elr)}; "
        f"KRaft quorum {_e(quorum)}.</p>"
    )


def _health_log_dirs(dirs: dict[str, Any] | None) -> str:
    """Brokers with offline log directories (and the replicas in them), and brokers not read."""
    if not dirs:
        return ""
    items = [
        f"<li data-offline-dirs='{_e(b['broker_id'])}'>broker {_e(b['broker_id'])}: {_offline_dirs_text(b)}: "
        f"{_e(', '.join(b['partitions'][:20]))}{_disagreeing(b.get('disagreements'))}</li>"
        for b in dirs.get("brokers", [])
        if b.get("state") == "offline dirs"
    ]
    if dirs.get("unknown_brokers"):
        items.append(
            f"<li data-dirs-unknown>log dirs unknown on broker(s) {_e(dirs['unknown_brokers'])}</li>"
        )
    if not items:
        return "<p class='muted' data-offline-dirs='none'>No offline log directory.</p>"
    cls = "bad" if dirs.get("offline_dirs") else "warn"
    return f"<div class='tile {cls} log-dirs'><b>log dirs</b><ul>{''.join(items)}</ul></div>"


def _offline_dirs_text(broker: dict[str, Any]) -> str:
    """A broker's failed dirs and how many replicas are offline on them (the controller's word alone
    when its own answer lists no offline dir)."""
    n = len(broker["partitions"])
    if not broker["offline_dirs"]:
        return f"no dir offline in its own answer, yet the controller names {n} replica(s) offline"
    dirs = ", ".join(d["path"] + " (" + d["error"] + ")" for d in broker["offline_dirs"])
    return f"{_e(dirs)}; {n} replica(s) in them"


def _disagreeing(disagreements: dict[str, Any] | None) -> str:
    """Where the broker's DescribeLogDirs and the controller disagree (offline by the rule), in words."""
    if not disagreements:
        return ""
    shown = "; ".join(
        f"{name}: {d.get('describe_log_dirs')}, the controller {d.get('offline_replicas')}"
        for name, d in sorted(disagreements.items())[:5]
    )
    return f" <span class='muted' data-dirs-disagree>(the two answers disagree on {len(disagreements)}: {_e(shown)})</span>"


def _broker_chart(brokers: list[dict[str, Any]]) -> str:
    """Three bar groups (replicas, leaders, bytes) per broker, as inline SVG."""
    if not brokers:
        return ""
    metrics = (
        ("replica_count", "replicas", "#2186eb"),
        ("leader_count", "leaders", "#f0b429"),
        ("size_bytes", "bytes", "#3ebd93"),
    )
    row_h, label_w, bar_w = 18, 90, 260
    height = 20 + len(brokers) * row_h * 3 + len(brokers) * 8
    out = [
        f"<svg class='broker-chart' role='img' width='{label_w + bar_w + 160}' height='{height}' "
        "xmlns='http://www.w3.org/2000/svg'><title>Replicas, leaders and bytes per broker</title>"
    ]
    maxima = {m: max((b.get(m) or 0) for b in brokers) or 1 for m, _, _ in metrics}
    y = 14
    for b in brokers:
        down = not b.get("alive") or b.get("fenced")
        out.append(
            f"<text x='0' y='{y + row_h}'>broker {_e(b.get('broker_id'))}{' (down)' if down else ''}</text>"
        )
        for m, label, colour in metrics:
            value = b.get(m)
            width = 0 if value is None else max(1, int(bar_w * value / maxima[m]))
            shown = "unknown" if value is None else (format_size(value) if m == "size_bytes" else str(value))
            out.append(
                f"<rect x='{label_w}' y='{y}' width='{width}' height='{row_h - 4}' fill='{colour}'>"
                f"<title>broker {_e(b.get('broker_id'))} {label}: {_e(shown)}</title></rect>"
                f"<text x='{label_w + width + 4}' y='{y + row_h - 6}'>{label} {_e(shown)}</text>"
            )
            y += row_h
        y += 8
    out.append("</svg>")
    return "".join(out)


def _broker_table(brokers: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr data-broker='{_e(b.get('broker_id'))}'><td>{_e(b.get('broker_id'))}</td><td>{_e(b.get('rack'))}</td>"
        f"<td>{'up' if b.get('alive') and not b.get('fenced') else 'DOWN'}</td>"
        f"<td class='replicas'>{_e(b.get('replica_count'))}</td><td class='leaders'>{_e(b.get('leader_count'))}</td>"
        f"<td>{_e('unknown' if b.get('size_bytes') is None else format_size(b['size_bytes']))}</td></tr>"
        for b in brokers
    )
    return (
        "<table class='brokers'><tr><th>broker</th><th>rack</th><th>state</th><th>replicas</th>"
        f"<th>leaders</th><th>bytes</th></tr>{rows}</table>"
    )


def _section(title: str, name: str, headers: list[str], rows: list[str], empty: str = "None.") -> str:
    """A section of the page: its heading, then its rows in table ``name``, or the ``empty``
    sentence (id ``no-<name>``) when there are none, so every section reads and is found alike."""
    if not rows:
        return f"<h2>{title}</h2><p id='no-{name}'>{empty}</p>"
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<h2>{title}</h2><table id='{name}'><tr>{head}</tr>{''.join(rows)}</table>"


def _gates(gates: list[dict[str, Any]]) -> str:
    rows = [
        f"<tr class='gate'><td>{_e(g['dag_id'])}</td><td>{_e(g['run_id'])}</td><td>{_e(g['subject'])}</td>"
        f"<td>{_e(g.get('created_at'))}</td><td class='who'>{_e(g.get('who_may_answer') or who_may_answer(g))}</td>"
        f"<td><a data-ui='1' target='_top' href='{_e(g['url'])}'>answer</a></td></tr>"
        for g in gates
    ]
    headers = ["runbook", "run", "question", "asked at", "who may answer", ""]
    return _section("Gates waiting for an answer", "gates", headers, rows)


def _runs(runs: list[dict[str, Any]], not_shown: dict[str, Any] | None = None) -> str:
    """Every queued or running run (those past what the page holds counted, with Airflow's list),
    then each runbook's latest finished ones with their outcome."""
    rows = []
    for r in runs:
        p = r.get("progress") or {}
        pct = p.get("percent_bytes", p.get("percent_partitions"))
        bar = (
            f"<span class='bar'><i style='width:{max(0, min(100, float(pct))):.0f}%'></i></span> "
            if pct is not None
            else ""
        )
        rows.append(
            f"<tr class='run' data-dag='{_e(r['dag_id'])}'><td><a data-ui='1' target='_top' href='{_e(r['url'])}'>"
            f"{_e(r['dag_id'])}</a></td><td>{_e(r['run_id'])}</td>"
            f"<td class='status' data-status='{_e(r.get('status', r['state']))}'><b>{_e(r.get('status', r['state']))}</b>"
            f"{'<br><span class=muted>' + _e(r['why']) + '</span>' if r.get('why') else ''}</td>"
            f"<td>{_e(r.get('start_date'))}</td><td class='ended'>{_e(r.get('end_date'))}</td>"
            f"<td class='progress'>{bar}{_e(p.get('line', ''))}</td><td>{_stop(r, p)}</td></tr>"
        )
    headers = ["runbook", "run", "status", "started", "ended", "progress", ""]
    return _section("Runs", "runs", headers, rows) + _runs_not_shown(not_shown or {})


def _runs_not_shown(not_shown: dict[str, Any]) -> str:
    """How many queued or running runs the page could not hold, linked to Airflow's lists of them."""
    if not not_shown:
        return ""
    links = " and ".join(
        f"<a data-ui='1' target='_top' href='{_e(url)}'>{_e(state)}</a>"
        for state, url in sorted(not_shown.get("urls", {}).items())
    )
    return (
        f"<p class='tile bad' id='runs-not-shown'>{_e(not_shown['active_total'])} runs are queued or running; "
        f"this page lists {_e(not_shown['active_shown'])} of them (the ones that move replicas first). "
        f"Airflow lists them all: {links}.</p>"
    )


def _stop(run: dict[str, Any], progress: dict[str, Any]) -> str:
    """The Stop link of a running reassignment: the run's stop page in the whole window (a reason
    and a Stop button that acts at once, recorded with the user), not a button that acts from here."""
    if not run.get("stop_url") or progress.get("stopped") or run.get("state") not in ("queued", "running"):
        return ""
    conn = config_id_of(run, "kafka_default")
    return (
        f"<a class='stop' data-ui='1' target='_top' href='{_e(run['stop_url'])}' title='Opens this "
        f"run&#39;s stop page: give a reason and press Stop. It acts at once on {_e(conn)}: cancels what "
        "this run has in flight, removes its throttles and ends the run saying what moved, what was "
        "cancelled and what is left.'>Stop&hellip;</a>"
    )


def _alerts(records: list[dict[str, Any]]) -> str:
    """The alerts the intake took, newest first: the alert, its state, what the intake did and why."""
    rows = [
        f"<tr class='alert'{_anchor(d)}><td>{_e(_utc(d.get('at_ms')))}</td><td>{_e(d.get('subject'))}</td>"
        f"<td>{_e((d.get('observed') or {}).get('status'))}</td><td><b>{_e(d.get('decision'))}</b></td>"
        f"<td>{_e(d.get('reason'))}</td></tr>"
        for d in records
    ]
    headers = ["at (UTC)", "alert", "state", "intake", "why"]
    empty = "None taken yet (Alertmanager posts to /kafka-alerts/alertmanager: docs/notifications.md)."
    return _section("Alerts", "alerts", headers, rows, empty=empty)


def _utc(at_ms: Any) -> str:
    """A journal record's time, UTC, to the second."""
    return datetime.fromtimestamp((at_ms or 0) / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _decisions(records: list[dict[str, Any]]) -> str:
    rows = [
        f"<tr class='decision'{_anchor(d)}><td>{_e(datetime.fromtimestamp(d.get('at_ms', 0) / 1000, timezone.utc).strftime('%Y-%m-%d %H:%M:%S'))}"
        f"</td><td>{_e(d.get('dag_id'))}<br><span class='muted'>{_e(d.get('task_id'))}</span></td>"
        f"<td>{_e(d.get('level'))}</td><td>{_e(d.get('step'))}{' [' + _e(d['subject']) + ']' if d.get('subject') else ''}"
        f"</td><td><b>{_e(d.get('decision'))}</b> because {_e(d.get('reason'))}{_facts(d)}</td></tr>"
        for d in records
    ]
    headers = ["at (UTC)", "runbook / task", "level", "step", "decision"]
    return _section("Last decisions", "decisions", headers, rows, empty="None recorded yet.")


def _anchor(record: dict[str, Any]) -> str:
    """The row's id: the record id its task log's facts line names (``decision <id>``)."""
    return f" id='decision-{_e(record['record_id'])}'" if record.get("record_id") else ""


def _facts(record: dict[str, Any]) -> str:
    """The observed facts, folded: the prose stays one line, the facts open on demand."""
    observed = record.get("observed")
    if not observed:
        return ""
    text = json.dumps(observed, sort_keys=True, default=str, indent=1)
    return f"<details class='facts'><summary>facts</summary><pre>{_e(text)}</pre></details>"


def render_decision(record: dict[str, Any]) -> str:
    """One decision record on a page of its own: the prose line, where it was made, every fact.

    What a DECISION line's ``(decision <id>)`` opens: the facts the log line had to cut.
    """
    at = datetime.fromtimestamp(record.get("at_ms", 0) / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    subject = f" [{_e(record['subject'])}]" if record.get("subject") else ""
    action = f"<p>action: {_e(record['action'])}</p>" if record.get("action") else ""
    facts = json.dumps(record.get("observed") or {}, sort_keys=True, default=str, indent=1)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>decision {_e(record.get('record_id'))}"
        "</title></head><body style='font-family:sans-serif;max-width:70em;margin:2em'>"
        f"<h1>decision {_e(record.get('record_id'))}</h1>"
        f"<p class='where'>{_e(record.get('dag_id'))} / {_e(record.get('run_id'))} / "
        f"{_e(record.get('task_id'))}, {at}, {_e(record.get('level'))}</p>"
        f"<p class='prose'><b>{_e(record.get('step'))}{subject}: {_e(record.get('decision'))}</b> because "
        f"{_e(record.get('reason'))}</p>{action}<h2>facts</h2><pre class='facts'>{_e(facts)}</pre>"
        "</body></html>"
    )
