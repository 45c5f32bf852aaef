"""The shared tables behind every tenant schema's views (issue 28, docs/decisions.md).

A sub-account's rows live in tables of the schema `tenant_data` shared by all sub-accounts and
keyed by `sub_account_id`; its tenant schema holds one view per table, limited to its own rows
(tenancy/schema.py). So `tenant_metadata` stays the description of the tables as tenant SQL sees
them, and this module derives the shared tables from it by one rule: every table gains
`sub_account_id` first, and every key, unique index, foreign key and index is led by it (a
foreign key so composed cannot point at another sub-account's row; an exclusion constraint so
composed compares one sub-account's rows only). GIN indexes lead with it through btree_gin's
operator class for uuid, so a contact search reads one sub-account's entries only.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.sql.visitors import replacement_traverse

from tenancy.tables.base import tenant_metadata

SHARED_SCHEMA = "tenant_data"
SUB_ACCOUNT = "sub_account_id"

shared_metadata = sa.MetaData(schema=SHARED_SCHEMA)


def _name(constraint: Any) -> str:
    """The name the tenant table's constraint has (its naming convention applied when it was
    attached), kept so the names the code maps errors by stay the same."""
    if not isinstance(constraint.name, str):
        raise ValueError(f"a tenant constraint without a name: {constraint!r}")
    return constraint.name


def _rebind(expression: Any, old: sa.Table, new: sa.Table) -> Any:
    """`expression` with the tenant table's columns replaced by the shared table's."""
    if isinstance(expression, str):
        return new.c[expression]

    def swap(element: Any) -> Any:
        if isinstance(element, sa.Column) and element.table is old:
            return new.c[element.name]
        return None

    return replacement_traverse(expression, {}, swap)  # type: ignore[call-overload]


def _postgresql_options(item: Any) -> dict[str, Any]:
    return {
        f"postgresql_{key}": value
        for key, value in item.dialect_options["postgresql"].items()
        if value is not None and value != {} and value is not False
    }


def _on_delete(constraint: sa.ForeignKeyConstraint) -> str | None:
    """The tenant key's action, but SET NULL becomes NO ACTION: set to null, a key led by the
    sub-account would clear the sub-account too (PostgreSQL 15 can name the columns to clear,
    which Citus refuses on its distribution column). Nothing deletes such a parent row but the
    purge of the sub-account (agents, campaigns and pools are kept when deleted, companies are
    never deleted), which deletes the referring rows first."""
    return None if constraint.ondelete == "SET NULL" else constraint.ondelete


def _shared_table(table: sa.Table) -> sa.Table:
    columns: list[Any] = [sa.Column(SUB_ACCOUNT, pg.UUID(as_uuid=True), nullable=False)]
    columns += [column._copy() for column in table.columns]
    for column in columns[1:]:
        # The keys and indexes come from the tenant table's constraints, led by the sub-account.
        column.primary_key = False
        column.unique = None
        column.index = None
    shared = sa.Table(table.name, shared_metadata, *columns)
    shared.append_constraint(
        sa.PrimaryKeyConstraint(
            SUB_ACCOUNT,
            *(column.name for column in table.primary_key.columns),
            name=_name(table.primary_key),
        )
    )
    for constraint in table.constraints:
        name = _name(constraint)
        if isinstance(constraint, sa.ForeignKeyConstraint):
            shared.append_constraint(
                sa.ForeignKeyConstraint(
                    [SUB_ACCOUNT, *(element.parent.name for element in constraint.elements)],
                    [
                        f"{SHARED_SCHEMA}.{constraint.referred_table.name}.{SUB_ACCOUNT}",
                        *(
                            f"{SHARED_SCHEMA}.{constraint.referred_table.name}.{element.column.name}"
                            for element in constraint.elements
                        ),
                    ],
                    name=name,
                    ondelete=_on_delete(constraint),
                )
            )
        elif isinstance(constraint, sa.UniqueConstraint):
            shared.append_constraint(
                sa.UniqueConstraint(
                    SUB_ACCOUNT, *(column.name for column in constraint.columns), name=name
                )
            )
        elif isinstance(constraint, pg.ExcludeConstraint):
            elements = [
                (_rebind(expression, table, shared), operator)
                for expression, _, operator in constraint._render_exprs
            ]
            shared.append_constraint(
                pg.ExcludeConstraint(
                    (shared.c[SUB_ACCOUNT], "="),
                    *elements,
                    name=name,
                    using=constraint.using,
                    where=constraint.where,
                )
            )
        elif isinstance(constraint, sa.CheckConstraint):
            shared.append_constraint(sa.CheckConstraint(constraint.sqltext, name=name))
    for index in table.indexes:
        sa.Index(
            index.name,
            shared.c[SUB_ACCOUNT],
            *(_rebind(expression, table, shared) for expression in index.expressions),
            unique=index.unique,
            **_postgresql_options(index),
        )
    return shared


shared_tables = {table.name: _shared_table(table) for table in tenant_metadata.sorted_tables}
