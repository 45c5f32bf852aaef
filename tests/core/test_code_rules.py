"""Rules of the code itself, checked by walking the source with `ast` (as polar's org_scope
linter does) rather than trusted to every author: one function switches `search_path`, SQL that
names a tenant table lives only in the modules listed here, and `APIError` has one home.

What is checked is every string constant (f-string parts included, docstrings not): SQL built
from a variable table name escapes it, and so is written only where schemas are copied whole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from tenancy.tables import tenant_metadata

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "cli", "integrations", "jobs", "migrations", "tenancy", "voice")

# The functions that may write a search_path, tenant setting or role switch, as (module,
# function).
SEARCH_PATH_OWNERS = {
    # Its statement text, used by tenant_transaction and by set_search_path(_sync) for asyncpg
    # and SQLAlchemy/alembic work that needs a transaction of its own kind.
    ("tenancy/db.py", "search_path_sql"),
    # The tenant role, for tenant_transaction.
    ("tenancy/db.py", "tenant_role_sql"),
    # The tenant setting, for search_path_sql and for control work on one tenant's shared
    # rows (a purge).
    ("tenancy/db.py", "tenant_setting_sql"),
}

# The modules that may run SQL naming a tenant table (fnmatch patterns), each with its reason.
TENANT_SQL_MODULES = {
    "api/*/service.py": "a feature's rules, shared by its routes and jobs",
    "api/*/queries.py": "a feature's SQL",
    "api/*/tasks.py": "a feature's jobs: reload by id and run the feature's rules",
    "api/campaigns/delivery.py": "the campaign sender: claims, charges and records recipients",
    "api/events.py": "the outbox: writes webhook deliveries in the caller's tenant transaction",
    "tenancy/provisioning.py": "a new sub-account's schema and zero-balance wallet",
    "tenancy/tenant_ops.py": "export and import of a whole tenant schema",
    "tenancy/secrets_ops.py": "re-encryption of every tenant's secret columns",
    "migrations/*": "schema migrations",
}

SEARCH_PATH_SWITCH = re.compile(
    r"set_config\(\s*'(?:search_path|role|switchboard\.sub_account_id)'"
    r"|\bSET\s+(?:LOCAL\s+|SESSION\s+)?(?:search_path|switchboard\.sub_account_id)\b"
    # SET ROLE, not an UPDATE's `SET role = ...`
    r"|\bSET\s+(?:LOCAL\s+|SESSION\s+)?ROLE\b(?!\s*=)",
    re.IGNORECASE,
)

# The modules that may name the shared tables' schema or a tenant schema in SQL (tenant SQL
# names plain tables, which its transaction's search_path and row security resolve), each with
# its reason.
SCHEMA_NAMING_MODULES = {
    "tenancy/schema.py": "the tenant schemas' views over the shared tables",
    "tenancy/tables/*": "the table definitions",
    "tenancy/tenant_ops.py": "export, import and purge of a whole tenant",
    "migrations/*": "schema migrations",
}
SCHEMA_NAMING = re.compile(r"\btenant_data\s*\.|\bt_[0-9a-f]{32}\b|(?<![\w.])t_$", re.IGNORECASE)
SCHEMA_NAMES = {"SHARED_SCHEMA", "shared_metadata", "shared_tables"}
_TENANT_TABLES = "|".join(sorted(map(re.escape, tenant_metadata.tables), key=len, reverse=True))
# A tenant table right after a keyword that reads or writes it; `control.x` is not one.
TENANT_TABLE_SQL = re.compile(
    rf'\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE)\s+"?(?:{_TENANT_TABLES})\b"?(?![.\w])',
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    rule: str
    module: str
    line: int
    function: str | None
    text: str

    def __str__(self) -> str:
        where = f" in {self.function}()" if self.function else ""
        return f"{self.module}:{self.line}{where}: {self.text!r}"


def _docstrings(tree: ast.AST) -> set[int]:
    holders = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, holders)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _strings(tree: ast.AST) -> Iterator[tuple[ast.Constant, str | None]]:
    """Every string constant that is not a docstring, with the function it is written in."""
    skip = _docstrings(tree)

    def visit(node: ast.AST, function: str | None) -> Iterator[tuple[ast.Constant, str | None]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else function
            )
            if (
                isinstance(child, ast.Constant)
                and isinstance(child.value, str)
                and id(child) not in skip
            ):
                yield child, inner
            yield from visit(child, inner)

    yield from visit(tree, None)


def findings(source: str, module: str) -> list[Finding]:
    found = []
    for node, function in _strings(ast.parse(source)):
        for rule, pattern in (
            ("search_path", SEARCH_PATH_SWITCH),
            ("tenant_sql", TENANT_TABLE_SQL),
            ("schema_named", SCHEMA_NAMING),
        ):
            match = pattern.search(node.value)
            if match:
                found.append(Finding(rule, module, node.lineno, function, match.group(0)))
    return found


def source_files() -> Iterator[tuple[str, str]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), path.read_text()


def all_findings(rule: str) -> list[Finding]:
    return [
        found
        for module, source in source_files()
        for found in findings(source, module)
        if found.rule == rule
    ]


def may_switch_search_path(found: Finding) -> bool:
    return (found.module, found.function) in SEARCH_PATH_OWNERS


def may_name_tenant_tables(module: str) -> bool:
    return any(fnmatch(module, pattern) for pattern in TENANT_SQL_MODULES)


def test_search_path_is_switched_only_by_its_one_function() -> None:
    switches = all_findings("search_path")

    stray = [str(found) for found in switches if not may_switch_search_path(found)]

    assert not stray, "search_path switched outside tenancy.db.search_path_sql:\n" + "\n".join(
        stray
    )
    # The walk still sees the approved switch (a rename would make this test pass vacuously).
    assert {(found.module, found.function) for found in switches} == SEARCH_PATH_OWNERS


def test_sql_naming_a_tenant_table_runs_only_in_the_approved_modules() -> None:
    stray = [
        str(found)
        for found in all_findings("tenant_sql")
        if not may_name_tenant_tables(found.module)
    ]

    assert not stray, "tenant SQL outside TENANT_SQL_MODULES:\n" + "\n".join(stray)


def _names_schemas(module: str) -> bool:
    return any(fnmatch(module, pattern) for pattern in SCHEMA_NAMING_MODULES)


def _schema_imports(source: str, module: str) -> list[str]:
    return [
        f"{module}:{node.lineno}: imports {alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in SCHEMA_NAMES
    ]


def test_tenant_sql_never_names_the_shared_tables_or_a_tenant_schema() -> None:
    stray = [
        str(found)
        for found in all_findings("schema_named")
        if found.module != "tenancy/db.py" or found.function != "schema_name_for"
        if not _names_schemas(found.module)
    ]
    stray += [
        line
        for module, source in source_files()
        if not _names_schemas(module)
        for line in _schema_imports(source, module)
    ]

    assert not stray, "SQL naming tenant_data or a t_ schema:\n" + "\n".join(stray)


def test_the_walk_flags_sql_that_names_the_shared_tables_or_another_schema() -> None:
    route = """
from tenancy.tables.shared import SHARED_SCHEMA
ALL = "SELECT id FROM tenant_data.contacts"
OTHER = "UPDATE t_0123456789abcdef0123456789abcdef.contacts SET name = $1"

async def handler(conn, sub_account_id):
    await conn.fetch(f"SELECT * FROM t_{sub_account_id.hex}.notes")
    await conn.execute("SET LOCAL ROLE postgres")
"""

    found = findings(route, "api/contacts/service.py")

    assert [(f.rule, f.line) for f in found if f.rule != "tenant_sql"] == [
        ("schema_named", 3),
        ("schema_named", 4),
        ("schema_named", 7),
        ("search_path", 8),
    ]
    assert _schema_imports(route, "api/contacts/service.py") == [
        "api/contacts/service.py:2: imports SHARED_SCHEMA"
    ]


def test_api_error_is_imported_from_tenancy_errors_only() -> None:
    elsewhere = []
    for module, source in source_files():
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module != "tenancy.errors"
                and any(alias.name == "APIError" for alias in node.names)
            ):
                elsewhere.append(f"{module}:{node.lineno}: from {node.module} import APIError")
            if (
                isinstance(node, ast.ClassDef)
                and node.name == "APIError"
                and (module != "tenancy/errors.py")
            ):
                elsewhere.append(f"{module}:{node.lineno}: class APIError")

    assert not elsewhere, "\n".join(elsewhere)


def test_the_walk_flags_tenant_sql_and_search_path_switches_in_a_route_module() -> None:
    route = '''
"""Routes. A docstring may say SELECT id FROM contacts; it runs nothing."""
SELECT_CONTACT = "SELECT id, name FROM contacts WHERE id = $1"
ADD = """
insert into notes (contact_id, body) VALUES ($1, $2)
"""
CONTROL = "SELECT id FROM control.sub_accounts WHERE id = $1"

async def handler(conn, schema):
    await conn.execute(f"SET search_path TO {schema}")
    await conn.execute("SELECT set_config('search_path', $1, false)", schema)
    await conn.fetchval("SHOW search_path")
'''

    found = findings(route, "api/contacts/routes.py")

    assert [(f.rule, f.line, f.function) for f in found] == [
        ("tenant_sql", 3, None),
        ("tenant_sql", 4, None),
        ("search_path", 10, "handler"),
        ("search_path", 11, "handler"),
    ]
    assert not may_name_tenant_tables("api/contacts/routes.py")
    assert not may_name_tenant_tables("jobs/worker.py")
    assert may_name_tenant_tables("api/contacts/service.py")
