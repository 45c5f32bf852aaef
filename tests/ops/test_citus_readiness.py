"""The live catalog holds nothing that Citus schema-based sharding refuses (docs/operations.md).

With `citus.enable_schema_based_sharding`, every tenant schema becomes a distributed schema (all
its tables on one node, movable whole) and the control tables become reference tables. Citus
then refuses foreign keys into a distributed schema from another schema, and foreign keys out of
one except to reference tables; we refuse those to control too, so a tenant moves, exports and
purges on its own. Custom types in a tenant schema, sequences shared across schemas, inheritance
across schemas and foreign tables have no place there either.
"""

from __future__ import annotations

import uuid

import asyncpg

TENANT = r"'^t_[0-9a-f]{32}$'"

FOREIGN_KEYS_OUT_OF_TENANTS = f"""
SELECT format('%I.%I -> %I.%I (%s)', sn.nspname, s.relname, dn.nspname, d.relname, c.conname)
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS s ON s.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_class AS d ON d.oid = c.confrelid
JOIN pg_catalog.pg_namespace AS dn ON dn.oid = d.relnamespace
WHERE c.contype = 'f' AND sn.nspname ~ {TENANT} AND dn.oid <> sn.oid
"""

FOREIGN_KEYS_INTO_TENANTS = f"""
SELECT format('%I.%I -> %I.%I (%s)', sn.nspname, s.relname, dn.nspname, d.relname, c.conname)
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS s ON s.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_class AS d ON d.oid = c.confrelid
JOIN pg_catalog.pg_namespace AS dn ON dn.oid = d.relnamespace
WHERE c.contype = 'f' AND dn.nspname ~ {TENANT} AND sn.oid <> dn.oid
"""

# Enums, domains, ranges, stand-alone composite types and base types; a table's own row type
# (a composite whose relation is a table) and array types are not custom types.
CUSTOM_TYPES = f"""
SELECT format('%I.%I (typtype %s)', n.nspname, t.typname, t.typtype)
FROM pg_catalog.pg_type AS t
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_class AS r ON r.oid = t.typrelid
WHERE n.nspname ~ {TENANT}
  AND (t.typtype IN ('e', 'd', 'r', 'm')
       OR (t.typtype = 'c' AND r.relkind = 'c')
       OR (t.typtype = 'b' AND t.typcategory <> 'A'))
"""

# A sequence in a tenant schema belongs to a column of a table in that same schema, and a
# tenant table's sequence lives in the tenant's schema.
SEQUENCES_ACROSS_SCHEMAS = f"""
SELECT format('sequence %I.%I owned by %s', qn.nspname, q.relname,
              CASE WHEN t.oid IS NULL THEN 'no column'
                   ELSE format('%I.%I', tn.nspname, t.relname) END)
FROM pg_catalog.pg_class AS q
JOIN pg_catalog.pg_namespace AS qn ON qn.oid = q.relnamespace
LEFT JOIN pg_catalog.pg_depend AS d
       ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = q.oid
      AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.deptype IN ('a', 'i')
LEFT JOIN pg_catalog.pg_class AS t ON t.oid = d.refobjid
LEFT JOIN pg_catalog.pg_namespace AS tn ON tn.oid = t.relnamespace
WHERE q.relkind = 'S' AND (qn.nspname ~ {TENANT} OR tn.nspname ~ {TENANT})
  AND (t.oid IS NULL OR tn.oid <> qn.oid)
"""

# A column default (serial, nextval(...)) that draws from a sequence in another schema.
DEFAULTS_FROM_OTHER_SCHEMAS = f"""
SELECT format('%I.%I.%I draws from %I.%I', tn.nspname, t.relname, a.attname, qn.nspname,
              q.relname)
FROM pg_catalog.pg_attrdef AS ad
JOIN pg_catalog.pg_class AS t ON t.oid = ad.adrelid
JOIN pg_catalog.pg_namespace AS tn ON tn.oid = t.relnamespace
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = ad.adnum
JOIN pg_catalog.pg_depend AS d
     ON d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid = ad.oid
    AND d.refclassid = 'pg_catalog.pg_class'::regclass
JOIN pg_catalog.pg_class AS q ON q.oid = d.refobjid AND q.relkind = 'S'
JOIN pg_catalog.pg_namespace AS qn ON qn.oid = q.relnamespace
WHERE (tn.nspname ~ {TENANT} OR qn.nspname ~ {TENANT}) AND tn.oid <> qn.oid
"""

# Citus makes sequences safe to use from any node by putting the node id in the high bits:
# that only works for bigint sequences.
SMALL_SEQUENCES = f"""
SELECT format('%I.%I is %s', n.nspname, c.relname, format_type(s.seqtypid, NULL))
FROM pg_catalog.pg_sequence AS s
JOIN pg_catalog.pg_class AS c ON c.oid = s.seqrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname ~ {TENANT} AND s.seqtypid <> 'pg_catalog.int8'::regtype
"""

# Tables in a distributed schema cannot inherit or be inherited, nor be partitions of (or have
# partitions in) another schema, and a distributed schema cannot hold foreign tables.
INHERITANCE_AND_FOREIGN_TABLES = f"""
SELECT format('%I.%I inherits %I.%I', cn.nspname, c.relname, pn.nspname, p.relname)
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_namespace AS cn ON cn.oid = c.relnamespace
JOIN pg_catalog.pg_class AS p ON p.oid = i.inhparent
JOIN pg_catalog.pg_namespace AS pn ON pn.oid = p.relnamespace
WHERE (cn.nspname ~ {TENANT} OR pn.nspname ~ {TENANT})
  AND (NOT c.relispartition OR cn.oid <> pn.oid)
UNION ALL
SELECT format('foreign table %I.%I', n.nspname, c.relname)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind = 'f' AND n.nspname ~ {TENANT}
"""

CHECKS = {
    "foreign keys from a tenant schema to another schema": FOREIGN_KEYS_OUT_OF_TENANTS,
    "foreign keys into a tenant schema from another schema": FOREIGN_KEYS_INTO_TENANTS,
    "custom types inside tenant schemas": CUSTOM_TYPES,
    "sequences shared across schemas": SEQUENCES_ACROSS_SCHEMAS,
    "column defaults drawing on another schema's sequence": DEFAULTS_FROM_OTHER_SCHEMAS,
    "tenant sequences narrower than bigint": SMALL_SEQUENCES,
    "inheritance across schemas or foreign tables": INHERITANCE_AND_FOREIGN_TABLES,
}


async def violations(conn: asyncpg.Connection) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rule, query in CHECKS.items():
        rows = sorted(row[0] for row in await conn.fetch(query))
        if rows:
            found[rule] = rows
    return found


async def test_migrated_catalog_has_nothing_schema_based_sharding_forbids(
    pool, tenant, tenant_second
) -> None:
    async with pool.acquire() as conn:
        tenant_tables = await conn.fetch(
            f"""SELECT n.nspname, count(c.oid) AS tables FROM pg_catalog.pg_namespace AS n
                LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relkind = 'r'
                WHERE n.nspname ~ {TENANT} GROUP BY n.nspname"""
        )
        found = await violations(conn)
    schemas = {row["nspname"]: row["tables"] for row in tenant_tables}
    # Not a vacuous pass: both tenants' schemas are there and full of tables.
    assert schemas.get(tenant.schema, 0) > 1 and schemas.get(tenant_second.schema, 0) > 1
    assert found == {}, "\n".join(
        f"{rule}:\n  " + "\n  ".join(rows) for rule, rows in found.items()
    )


async def test_the_catalog_checks_catch_each_forbidden_construct(pool, tenant) -> None:
    # Given a scratch tenant schema with one of each forbidden thing (rolled back afterwards).
    scratch = f"t_{uuid.uuid4().hex}"
    statements = [
        f'CREATE SCHEMA "{scratch}"',
        f"CREATE TYPE \"{scratch}\".mood AS ENUM ('happy', 'sad')",
        f'CREATE DOMAIN "{scratch}".positive AS integer CHECK (VALUE > 0)',
        f'CREATE TYPE "{scratch}".pair AS (a integer, b integer)',
        f'CREATE SEQUENCE "{scratch}".loose_counter AS integer',
        "CREATE SEQUENCE control.control_probe_seq",
        f'CREATE TABLE "{scratch}".things (id bigint PRIMARY KEY,'
        f" sub_account_id uuid REFERENCES control.sub_accounts (id),"
        f" n integer DEFAULT nextval('control_probe_seq'))",
        f'CREATE TABLE control.probe_refs (thing_id bigint REFERENCES "{scratch}".things (id))',
        f'CREATE TABLE "{scratch}".child () INHERITS (control.probe_refs)',
    ]
    async with pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute("SET LOCAL search_path = control")
            for statement in statements:
                await conn.execute(statement)
            # When the checks run.
            found = await violations(conn)
        finally:
            await transaction.rollback()
    # Then every construct is reported, under its rule.
    joined = {rule: "\n".join(rows) for rule, rows in found.items()}
    assert (
        f"{scratch}.things -> control.sub_accounts"
        in joined["foreign keys from a tenant schema to another schema"]
    )
    assert (
        f"control.probe_refs -> {scratch}.things"
        in joined["foreign keys into a tenant schema from another schema"]
    )
    types = joined["custom types inside tenant schemas"]
    assert all(f"{scratch}.{name}" in types for name in ("mood", "positive", "pair"))
    assert f"{scratch}.things" not in types  # a table's row type is not a custom type
    assert (
        f"{scratch}.loose_counter owned by no column" in joined["sequences shared across schemas"]
    )
    assert (
        f"{scratch}.things.n draws from control.control_probe_seq"
        in joined["column defaults drawing on another schema's sequence"]
    )
    assert f"{scratch}.loose_counter is integer" in joined["tenant sequences narrower than bigint"]
    assert (
        f"{scratch}.child inherits control.probe_refs"
        in joined["inheritance across schemas or foreign tables"]
    )
    assert tenant.schema not in "\n".join(joined.values())
