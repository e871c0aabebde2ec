"""What a glue module's functions read, from its source: the params, or the typed request.

Shared by the glue tests of each runbook whose tasks build their request once and hand it
to the glue (``test_unclean.py``, ``test_broker_restart.py``, ``test_failed_broker_request.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType


def params_reads(function: ast.FunctionDef) -> list[str]:
    """Every ``params[...]`` / ``params.get(...)`` in a function, as source."""
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript | ast.Attribute) and getattr(node.value, "id", None) == "params":
            out.append(ast.unparse(node))
    return out


def functions(module: ModuleType) -> dict[str, ast.FunctionDef]:
    """The module's top-level functions by name, parsed from its file."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def callers_of(module: ModuleType, name: str) -> list[str]:
    """The module's top-level functions whose body names ``name`` (a call or an import of it)."""
    return [
        function_name
        for function_name, function in functions(module).items()
        if any(
            (isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.alias) and n.name == name)
            for n in ast.walk(function)
        )
    ]
