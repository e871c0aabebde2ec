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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kafka_runbooks import journal, storage
from kafka_runbooks.paths import safe_name
from kafka_runbooks.units import format_size

COUNTS = (
    ("offline", "Offline", "no leader: clients of these partitions are down"),
    ("under_min_isr", "Under min ISR", "acks=all producers are rejected"),
    ("at_min_isr", "At min ISR", "one more lost replica stops acks=all writes"),
    ("under_replicated", "Under-replicated (URP)", "redundancy reduced"),
)


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
            report.setdefault("kafka_conn_id", key.rsplit("/", 1)[-1][: -len(".json")])
            reports.append(report)
    if not reports:
        latest = _read_json(store, "reports/cluster_health/latest.json")
        if latest is not None:
            latest.setdefault("kafka_conn_id", "(latest report)")
            reports.append(latest)
    return reports


def run_progress(dag_id: str, run_id: str, root: Path | None = None) -> dict[str, Any] | None:
    """What a running runbook has done so far, from its own state files (None if it wrote none)."""
    store = _store(root)
    if dag_id == "kafka_failed_broker_reassignment":
        folder = f"reassign/{safe_name(dag_id)}/{safe_name(run_id)}"
        progress = _read_json(store, f"{folder}/progress.json") or _read_json(
            store, f"{folder}/adopt-progress.json"
        )
        if progress:
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


def overview(runs: list[dict], gates: list[dict], root: Path | None = None, decisions: int = 30) -> dict:
    """Everything the page shows, as JSON (the page's API returns exactly this)."""
    for run in runs:
        run["progress"] = run_progress(run["dag_id"], run["run_id"], root)
    journal_file = (root / "decisions" / "journal.jsonl") if root else None
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "health": health_reports(root),
        "runs": runs,
        "gates": gates,
        "decisions": journal.last(decisions, journal_file),
    }


# ------------------------------------------------------------------ rendering

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1f2933;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d9e2ec}
h3{font-size:14px;margin:12px 0 6px} .muted{color:#627d98;font-size:12px}
.tiles{display:flex;gap:8px;flex-wrap:wrap} .tile{border:1px solid #d9e2ec;border-radius:6px;padding:8px 12px;min-width:140px}
.tile b{font-size:22px;display:block} .bad{border-color:#e12d39;background:#ffe3e3} .ok{background:#e3f9e5}
.warn{border-color:#f0b429;background:#fffbea}
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
        "Read from the runbooks' artifacts and Airflow; nothing on this page changes the cluster.</div>",
        _gates(view["gates"]),
        _runs(view["runs"]),
        "<h2>Cluster health</h2>",
    ]
    if not view["health"]:
        parts.append("<p id='no-health'>No health report yet: run <code>kafka_cluster_health</code>.</p>")
    parts += [_health(report) for report in view["health"]]
    parts.append(_decisions(view["decisions"]))
    parts.append(f"<script>{OPEN_IN_UI}</script></body></html>")
    return "".join(parts)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _health(report: dict[str, Any]) -> str:
    conn = report.get("kafka_conn_id") or "?"
    counts = report.get("counts", {})
    taken = report.get("taken_at_ms")
    when = datetime.fromtimestamp(taken / 1000, timezone.utc).isoformat(timespec="seconds") if taken else "?"
    tiles = []
    for key, label, why in COUNTS:
        n = int(counts.get(key, 0) or 0)
        cls = "bad" if n and key in ("offline", "under_min_isr") else "warn" if n else "ok"
        tiles.append(
            f"<div class='tile {cls}' data-count='{key}' title='{_e(why)}'><b>{n}</b>{_e(label)}</div>"
        )
    flags = []
    for what, figures in (report.get("imbalance") or {}).items():
        if not figures or figures.get("mean") is None:
            continue
        state = "imbalanced" if figures.get("imbalanced") else "balanced"
        cls = "warn" if figures.get("imbalanced") else "ok"
        flags.append(
            f"<div class='tile {cls}' data-imbalance='{_e(what)}'><b>{_e(state)}</b>{_e(what)} per broker "
            f"{_e(figures.get('min'))} to {_e(figures.get('max'))} (mean {_e(figures.get('mean'))}, "
            f"threshold {_e(figures.get('threshold_pct'))}%)</div>"
        )
    brokers = report.get("brokers", [])
    return (
        f"<section class='health' data-conn='{_e(conn)}'><h3>Connection <code>{_e(conn)}</code> "
        f"<span class='muted'>cluster {_e(report.get('cluster_id'))}, {_e(report.get('partitions'))} partitions, "
        f"report of {_e(when)}</span></h3>"
        f"<div class='tiles'>{''.join(tiles)}{''.join(flags)}</div>"
        + _broker_chart(brokers)
        + _broker_table(brokers)
        + "</section>"
    )


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
        f"<td>{_e(g.get('created_at'))}</td><td><a data-ui='1' target='_top' href='{_e(g['url'])}'>answer</a></td></tr>"
        for g in gates
    ]
    return _section(
        "Gates waiting for an answer", "gates", ["runbook", "run", "question", "asked at", ""], rows
    )


def _runs(runs: list[dict[str, Any]]) -> str:
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
            f"{_e(r['dag_id'])}</a></td><td>{_e(r['run_id'])}</td><td>{_e(r['state'])}</td>"
            f"<td>{_e(r.get('start_date'))}</td><td class='progress'>{bar}{_e(p.get('line', ''))}</td>"
            f"<td>{_stop(r, p)}</td></tr>"
        )
    return _section(
        "Runbooks running now", "runs", ["runbook", "run", "state", "started", "progress", ""], rows
    )


def _stop(run: dict[str, Any], progress: dict[str, Any]) -> str:
    """The Stop link of a running reassignment: the stop runbook's page in the whole window (its
    Trigger button opens the form: connection and a reason), not a button that acts from here."""
    if not run.get("stop_url") or progress.get("stopped"):
        return ""
    conn = run.get("kafka_conn_id") or "kafka_default"
    return (
        f"<a class='stop' data-ui='1' target='_top' href='{_e(run['stop_url'])}' title='Opens "
        f"kafka_reassignment_stop: press Trigger, keep kafka_conn_id {_e(conn)}, give a reason. It cancels "
        "what this run has in flight and removes its throttles.'>Stop&hellip;</a>"
    )


def _decisions(records: list[dict[str, Any]]) -> str:
    rows = [
        f"<tr class='decision'><td>{_e(datetime.fromtimestamp(d.get('at_ms', 0) / 1000, timezone.utc).strftime('%Y-%m-%d %H:%M:%S'))}"
        f"</td><td>{_e(d.get('dag_id'))}<br><span class='muted'>{_e(d.get('task_id'))}</span></td>"
        f"<td>{_e(d.get('level'))}</td><td>{_e(d.get('step'))}{' [' + _e(d['subject']) + ']' if d.get('subject') else ''}"
        f"</td><td><b>{_e(d.get('decision'))}</b> because {_e(d.get('reason'))}</td></tr>"
        for d in records
    ]
    headers = ["at (UTC)", "runbook / task", "level", "step", "decision"]
    return _section("Last decisions", "decisions", headers, rows, empty="None recorded yet.")
