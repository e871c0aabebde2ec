"""The README and docs/ name only what exists.

The README is short and links into docs/, where each runbook's reference lives beside the
guides. Prose drifts when code moves; these checks make a broken link, a param the DAG
does not take (or one it takes that its page leaves out), a `make` target, a `kstack`
command or a setting that no longer exists fail the unit tests instead of a reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNBOOK_DOCS = sorted((ROOT / "docs" / "runbooks").glob("*.md"))
#: Where the settings the docs name must appear (code and build files, never the docs).
SOURCE_DIRS = (
    "dags",
    "plugins",
    "include",
    "devtools",
    "scripts",
    "spark_jobs",
    "bench",
    "tests",
    "docker",
    ".ci",
)
SOURCE_FILES = ("Makefile", "docker-compose.yaml", "pyproject.toml")
SOURCE_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".toml", ".cfg", ".properties", ""}
SETTING = re.compile(r"\b(?:KR|KAFKA_RUNBOOKS)_[A-Z0-9_]*[A-Z0-9]")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _code(text: str) -> list[str]:
    """The fenced blocks and inline code spans: where commands are written."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", _without_code_blocks(text))
    return blocks + spans


def slugs(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens,
    a repeated heading numbered from -1."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", _without_code_blocks(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def _resolves(path: Path, target: str) -> bool:
    """A relative link from `path`: its file exists in the repository, and so does its
    heading when it names one in a markdown file."""
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    if not linked.exists() or ROOT not in (linked, *linked.parents):
        return False
    return not (anchor and linked.suffix == ".md") or anchor in slugs(linked.read_text())


def broken_links(path: Path) -> list[str]:
    """Relative links of one markdown file whose file (or heading) does not exist."""
    targets = re.findall(r"\]\(([^)\s]+)\)", _without_code_blocks(path.read_text()))
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not _resolves(path, t)]


def documented_params(text: str) -> set[str]:
    """The backticked names in the first column of every params table (header `param`
    or `setting`)."""
    names: set[str] = set()
    in_table = False
    for line in text.splitlines():
        cells = line.split("|")
        if not line.startswith("|") or len(cells) < 3:
            in_table = False
            continue
        first = cells[1].strip()
        if first.lower() in ("param", "setting"):
            in_table = True
        elif in_table:
            names |= set(re.findall(r"`([a-z_][a-z0-9_]*)`", first))
    return names


def commands(text: str, program: str) -> set[str]:
    """The subcommands (or targets) of `program` named in the code of a page."""
    pattern = re.compile(rf"(?<![\w-]){program} ([a-z][\w-]*)")
    return {m for code in _code(text) for m in pattern.findall(code)}


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", (ROOT / "Makefile").read_text(), flags=re.M))


def kstack_commands() -> set[str]:
    from kafka_runbooks_dev.localstack.cli import build_parser

    [sub] = [a for a in build_parser()._actions if a.dest == "command"]
    return set(sub.choices)


def source_settings() -> set[str]:
    """Every KR_* / KAFKA_RUNBOOKS_* token in the code, prefixes ending in `_` included."""
    paths = [ROOT / f for f in SOURCE_FILES]
    for folder in SOURCE_DIRS:
        paths += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    tokens: set[str] = set()
    for path in paths:
        if path != Path(__file__).resolve() and "__pycache__" not in path.parts:
            tokens |= set(re.findall(r"\b(?:KR|KAFKA_RUNBOOKS)_[A-Z0-9_]*", path.read_text(errors="replace")))
    return tokens


def unknown_settings(text: str, known: set[str]) -> set[str]:
    """Settings a page names that the code never reads, by full name or by a family prefix
    such as KAFKA_RUNBOOKS_FAILED_BROKER_<KEY>."""
    prefixes = {t for t in known if t.endswith("_") and t not in ("KR_", "KAFKA_RUNBOOKS_")}
    return {
        name
        for name in SETTING.findall(text)
        if name not in known and not any(name.startswith(p) or f"{name}_" == p for p in prefixes)
    }


@pytest.fixture(scope="module")
def dag_params() -> dict[str, set[str]]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert bag.import_errors == {}
    return {dag_id: set(dag.params.keys()) for dag_id, dag in bag.dags.items()}


def test_the_docs_are_found():
    assert ROOT / "README.md" in DOCS and len(DOCS) > 10
    assert len(RUNBOOK_DOCS) >= 9


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_every_dag_has_its_runbook_page(dag_params):
    assert {p.stem for p in RUNBOOK_DOCS} == set(dag_params)


@pytest.mark.parametrize("path", RUNBOOK_DOCS, ids=_name)
def test_a_runbook_page_documents_exactly_its_dags_params(path, dag_params):
    documented = documented_params(path.read_text())
    taken = dag_params[path.stem]
    assert documented - taken == set(), "documented, but not a param of the DAG"
    assert taken - documented == set(), "a param of the DAG that its page does not document"


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_make_target_named_exists(path):
    assert commands(path.read_text(), "make") - make_targets() == set()


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_kstack_command_named_exists(path):
    assert commands(path.read_text(), "kstack") - kstack_commands() == set()


def test_every_setting_named_is_read_by_the_code():
    known = source_settings()
    assert {"KR_STACK_PORT_BASE", "KAFKA_RUNBOOKS_DATA_URL"} <= known, "the scan found no settings"
    unknown = {_name(p): unknown_settings(p.read_text(), known) for p in DOCS}
    assert {k: v for k, v in unknown.items() if v} == {}


def test_the_checks_see_what_the_docs_name():
    """The parsers find the names they are meant to check (a parser that finds nothing
    would pass every test above)."""
    readme = (ROOT / "README.md").read_text()
    assert {"demo", "test", "stop"} <= commands(readme, "make")
    assert {"kill", "start-node", "fail-connector"} <= commands(readme, "kstack")
    assert "KR_AIRFLOW_PORT" in SETTING.findall(readme)
    restart = (ROOT / "docs" / "runbooks" / "kafka_broker_restart.md").read_text()
    assert {"node_ids", "probe_conn_id", "restart_conn_id"} <= documented_params(restart)
    assert "approval-gates-a-record-bound-to-the-plan" in slugs(
        (ROOT / "docs" / "approval-gates.md").read_text()
    )


def test_the_readme_names_every_port_setting():
    """The README's port summary stays complete: every KR_*PORT* setting the code reads
    (a port, or the base ports derive from) is in its ports table."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("### Ports, and what changes them") :]
    table = table[: table.index("\n## ")]
    port_settings = {t for t in source_settings() if "PORT" in t and not t.endswith("_")}
    assert len(port_settings) >= 5
    assert port_settings - set(SETTING.findall(table)) == set()
