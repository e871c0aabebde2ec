"""One clock per comparison: the roller's code never puts a time read on a broker, host,
kubelet or exporter in the same comparison or subtraction as the worker's clock.

A source scan, because a skewed clock is a bug that no fake cluster shows unless someone
thought of skewing it: the remote times (``last_caught_up_ms``, ``last_fetch_ms``,
``started_at_ms``, ``process_start_ms``) may meet each other and the leader's own time,
never ``time.time()``, the roller's ``clock()`` or a value taken from it (``now_ms``,
``restarted_at_ms``, ``requested_ms``, ``since_ms``). The behaviour under skew itself is
checked in test_roller.py (clusters 2 minutes ahead and behind).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
FILES = [
    *sorted((ROOT / "include/kafka_runbooks/restart").glob("*.py")),
    ROOT / "include/kafka_runbooks/model.py",
]
REMOTE = {"last_caught_up_ms", "last_fetch_ms", "started_at_ms", "process_start_ms"}
WORKER = {"now_ms", "restarted_at_ms", "requested_ms", "since_ms", "clock", "time"}


def _names(node: ast.AST) -> set[str]:
    """Every name, attribute and string key (``d.get("started_at_ms")``) in an expression."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.add(sub.value)
    return out


def _mixed(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            names = _names(node)
            if names & REMOTE and names & WORKER:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_remote_time_is_compared_with_the_workers_clock():
    assert [f for path in FILES for f in _mixed(path)] == []


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The scan itself can fail: the comparisons issue #23 found are caught."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def a(now_ms, v):\n    return now_ms - v.last_caught_up_ms <= 5\n"
        "def b(now, requested_ms):\n    return now.get('started_at_ms') > requested_ms\n"
        "def c(v, since_ms):\n    return (v.last_caught_up_ms or 0) > since_ms\n"
    )
    assert {f.split(":")[1] for f in _mixed(sample)} == {"2", "4", "6"}
