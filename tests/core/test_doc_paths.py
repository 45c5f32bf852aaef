"""Every repository path that the docs (README, docs/, bench/ and deploy/ pages) and the code's
docstrings name exists: a moved or deleted file is caught where it is still named. A dotted name
after a module (`api/events.emit`) counts as that module; patterns (`api/*/service.py`) and
placeholders (`<name>`) are not paths."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = (
    "api",
    "cli",
    "integrations",
    "jobs",
    "migrations",
    "tenancy",
    "voice",
    "tests",
    "bench",
    "deploy",
    "docs",
    "scripts",
    ".ci",
)
CODE = (
    "api",
    "cli",
    "integrations",
    "jobs",
    "migrations",
    "tenancy",
    "voice",
    "tests",
    "bench",
    "scripts",
)
ROOT_NAMES = "|".join(re.escape(root) for root in ROOTS)
PATH = re.compile(rf"(?<![\w./-])((?:{ROOT_NAMES})/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
# Files the reader makes from an example, as the page that names them says.
MADE_BY_THE_READER = {"deploy/.env"}


def documents() -> Iterator[tuple[Path, str]]:
    pages = [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "bench").rglob("*.md"),
        *(REPO / "deploy").rglob("*.md"),
    ]
    for page in pages:
        yield page, page.read_text()
    for root in CODE:
        for source in (REPO / root).rglob("*.py"):
            tree = ast.parse(source.read_text())
            for node in ast.walk(tree):
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    docstring = ast.get_docstring(node)
                    if docstring:
                        yield source, docstring


def exists(named: str) -> bool:
    if named in MADE_BY_THE_READER or (REPO / named).exists():
        return True
    module, dot, _attribute = named.rpartition(".")
    return bool(dot) and "/" in module and (REPO / f"{module}.py").exists()


def test_every_path_named_in_docs_and_docstrings_exists() -> None:
    missing = sorted(
        {
            f"{where.relative_to(REPO)}: {named}"
            for where, text in documents()
            for named in (match.group(1).rstrip(".") for match in PATH.finditer(text))
            if not any(mark in named for mark in "*<{") and not exists(named)
        }
    )
    assert missing == []


def test_a_stale_path_would_be_found() -> None:
    text = "moved to `api/contacts/nowhere.py`, see api/events.emit and api/*/service.py"
    named = [match.group(1) for match in PATH.finditer(text)]
    assert [path for path in named if "*" not in path and not exists(path)] == [
        "api/contacts/nowhere.py"
    ]
