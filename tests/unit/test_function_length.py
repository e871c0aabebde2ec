"""Functions of at most 50 lines in every product folder: the DAGs, the plugins, the domain
library, the Spark jobs and the local stack.

A reader holds a 50-line function in view at once; the planner's longest ones (loading the
snapshot, choosing receivers, writing the plan) mixed three steps each. The check reads the
source (no Spark needed), so a long function fails here before review (issue #26 counted 29
long product functions; none is left).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("spark_jobs", "dags", "include", "plugins", "devtools")
MAX_LINES = 50
FILES = sorted(path for folder in CHECKED for path in (ROOT / folder).rglob("*.py"))


def long_functions(source: str) -> list[tuple[str, int]]:
    """Every function (nested and methods too) longer than MAX_LINES, with its length."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES:
                out.append((node.name, length))
    return out


def test_the_check_counts_a_function_from_its_def_to_its_last_line():
    def body(lines: int, indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    assert long_functions(f"def f():\n{body(MAX_LINES - 1, '    ')}") == []
    assert long_functions(f"def f():\n{body(MAX_LINES, '    ')}") == [("f", MAX_LINES + 1)]
    method = f"class C:\n    def m(self):\n{body(MAX_LINES, '        ')}"
    assert long_functions(method) == [("m", MAX_LINES + 1)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_longer_than_50_lines(path: Path):
    assert long_functions(path.read_text()) == [], f"{path.name}: split these into steps that say why"


def test_every_checked_folder_has_files():
    assert {p.relative_to(ROOT).parts[0] for p in FILES} == set(CHECKED)
