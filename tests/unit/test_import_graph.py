"""The product's import graph has no circles, and every function-local import resolves.

An import circle works until someone moves one import to module level (or imports the
modules in another order) and then fails at import time, in a DAG file the scheduler
silently skips; function-local imports are how circles hide. A broken function-local
import fails only when that function runs, which for the plugin glue means an end-to-end
run. Both are read here from the source (the AST), not from a running import.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "kafka_runbooks": ROOT / "include",
    "kafka_runbooks_airflow": ROOT / "plugins",
    "kafka_runbooks_dev": ROOT / "devtools",  # the stack and the campaign: a circle there breaks the tests
}


@dataclass(frozen=True)
class Import:
    """One import statement's target: a module and, for ``from m import n``, the name."""

    module: str
    name: str | None
    local: bool
    line: int


def _modules() -> dict[str, Path]:
    """Every module of the two product packages, by dotted name."""
    found: dict[str, Path] = {}
    for package, base in PACKAGES.items():
        for path in sorted((base / package).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _absolute(module: str, path: Path, level: int, target: str | None) -> str:
    """The absolute name of a (possibly relative) import target."""
    if level == 0:
        return target or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _function_nodes(tree: ast.Module) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``: never run, so no edge at run time."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(
                id(n) for s in node.body for n in ast.walk(s) if isinstance(n, (ast.Import, ast.ImportFrom))
            )
    return inside


def _imports(module: str, path: Path) -> Iterator[Import]:
    """Every import in a module that runs, module-level and function-local."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local, typing_only = _function_nodes(tree), _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, None, id(node) in local, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path, node.level, node.module)
            for alias in node.names:
                yield Import(target, alias.name, id(node) in local, node.lineno)


def _edges(module: str, imp: Import, modules: dict[str, Path]) -> Iterator[str]:
    """The product modules an import loads: the target, or a submodule named by ``from``."""
    if imp.name and f"{imp.module}.{imp.name}" in modules:
        yield f"{imp.module}.{imp.name}"
    elif imp.module in modules:
        yield imp.module
    elif imp.name is None:
        parts = imp.module.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        if parts:
            yield ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the product modules it imports (packages' own ``__init__`` excluded as
    a target of their children, which Python loads first anyway)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module, path in modules.items():
        for imp in _imports(module, path):
            graph[module].update(t for t in _edges(module, imp, modules) if t != module)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative, so deep graphs do not recurse)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def test_tarjan_finds_a_circle_and_leaves_a_chain_alone():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d"], ["e"]]


def test_the_product_modules_import_no_circle():
    circles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    for circle in circles:
        print("import circle:", " <-> ".join(circle))
    assert circles == []


def _find(name: str):
    """The module's spec; None when there is none; the module itself when it is loaded already
    without a spec (find_spec raises ValueError for those, e.g. cryptography's Rust submodules)."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    except ValueError:
        return sys.modules.get(name)


def _unresolved(module: str, imp: Import) -> str | None:
    """Why a function-local import would fail at run time, or None when it resolves."""
    spec = _find(imp.module)
    if spec is None:
        return f"{module}:{imp.line}: no module {imp.module}"
    if imp.name is None:
        return None
    target = importlib.import_module(imp.module)
    if hasattr(target, "__path__") and _find(f"{imp.module}.{imp.name}"):  # a package's submodule
        return None
    # A module-level annotation (``SUPERVISOR_COMMS: CommsDecoder`` in Airflow's task
    # runner) is a name the module declares and assigns when its process starts.
    if not hasattr(target, imp.name) and imp.name not in getattr(target, "__annotations__", {}):
        return f"{module}:{imp.line}: {imp.module} has no {imp.name}"
    return None


def test_every_function_local_import_resolves():
    modules = _modules()
    broken = [
        problem
        for module, path in modules.items()
        for imp in _imports(module, path)
        if imp.local and (problem := _unresolved(module, imp))
    ]
    assert broken == []
