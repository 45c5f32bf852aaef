"""The live catalog holds nothing that Citus row-based sharding refuses (docs/operations.md).

On Citus the shared tables of `tenant_data` become co-located distributed tables with the
distribution column `sub_account_id`, the control tables reference tables, and the tenant
schemas (one view per shared table and their `alembic_version`) stay local objects. Citus then
refuses a unique, primary key or exclusion constraint without the distribution column (an
exclusion constraint needs it with `=`), a foreign key between distributed tables that does not
pair the distribution columns, a foreign key from a reference table into a distributed one,
`SET NULL`/`SET DEFAULT` on delete (or any action but `NO ACTION`/`RESTRICT` on update) in a
foreign key over the distribution column, foreign tables, and inheritance; sequences narrower than
bigint break on the workers. A table in a tenant schema would stay an undistributed local table,
and custom types there or in `tenant_data` become distributed objects to propagate and keep in
step.
"""

from __future__ import annotations

import uuid

import asyncpg

TENANT = r"'^t_[0-9a-f]{32}$'"

# Primary keys, unique constraints and unique indexes are all unique indexes; INCLUDE columns do
# not count, only key columns enforce anything.
UNIQUE_WITHOUT_SUB_ACCOUNT = """
SELECT format('%I.%I %s', n.nspname, t.relname, pg_get_indexdef(i.indexrelid))
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.relnamespace
LEFT JOIN pg_catalog.pg_attribute AS a
       ON a.attrelid = t.oid AND a.attname = 'sub_account_id' AND NOT a.attisdropped
WHERE n.nspname = 'tenant_data' AND i.indisunique
  AND (a.attnum IS NULL OR NOT a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1]))
UNION ALL
SELECT format('%I.%I %s', n.nspname, t.relname, pg_get_constraintdef(c.oid))
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS t ON t.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.relnamespace
WHERE n.nspname = 'tenant_data' AND c.contype = 'x'
  AND NOT EXISTS (
      SELECT FROM unnest(c.conkey, c.conexclop) AS k(attnum, op)
      JOIN pg_catalog.pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = k.attnum
      JOIN pg_catalog.pg_operator AS o ON o.oid = k.op
      WHERE a.attname = 'sub_account_id' AND o.oprname = '=')
"""

# Co-located foreign keys hold on one shard only when each side's sub_account_id sits at the
# same place in the key; one to control (a reference table) would be accepted by Citus, but a
# sub-account's rows refer to nothing outside its own.
FOREIGN_KEYS_NOT_ON_SUB_ACCOUNT = """
SELECT format('%I.%I -> %I.%I (%s)', sn.nspname, s.relname, dn.nspname, d.relname, c.conname)
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS s ON s.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_class AS d ON d.oid = c.confrelid
JOIN pg_catalog.pg_namespace AS dn ON dn.oid = d.relnamespace
WHERE c.contype = 'f' AND sn.nspname = 'tenant_data'
  AND NOT (dn.nspname = 'tenant_data' AND EXISTS (
      SELECT FROM unnest(c.conkey, c.confkey) AS k(src, dst)
      JOIN pg_catalog.pg_attribute AS sa ON sa.attrelid = c.conrelid AND sa.attnum = k.src
      JOIN pg_catalog.pg_attribute AS da ON da.attrelid = c.confrelid AND da.attnum = k.dst
      WHERE sa.attname = 'sub_account_id' AND da.attname = 'sub_account_id'))
"""

FOREIGN_KEYS_INTO_TENANT_DATA = """
SELECT format('%I.%I -> %I.%I (%s)', sn.nspname, s.relname, dn.nspname, d.relname, c.conname)
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS s ON s.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS sn ON sn.oid = s.relnamespace
JOIN pg_catalog.pg_class AS d ON d.oid = c.confrelid
JOIN pg_catalog.pg_namespace AS dn ON dn.oid = d.relnamespace
WHERE c.contype = 'f' AND dn.nspname = 'tenant_data' AND sn.nspname <> 'tenant_data'
"""

# Citus will not set the distribution column to NULL or its default, nor cascade an update of
# it: it refuses these actions even with PostgreSQL 15's column list (`SET NULL (pool_id)`).
FOREIGN_KEY_ACTIONS_CITUS_REFUSES = """
SELECT format('%I.%I (%s) %s', n.nspname, s.relname, c.conname, pg_get_constraintdef(c.oid))
FROM pg_catalog.pg_constraint AS c
JOIN pg_catalog.pg_class AS s ON s.oid = c.conrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = s.relnamespace
WHERE c.contype = 'f' AND n.nspname = 'tenant_data'
  AND (c.confdeltype IN ('n', 'd') OR c.confupdtype IN ('n', 'd', 'c'))
"""

TABLES_WITHOUT_SUB_ACCOUNT = """
SELECT format('%I.%I', n.nspname, t.relname)
FROM pg_catalog.pg_class AS t
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.relnamespace
WHERE n.nspname = 'tenant_data' AND t.relkind IN ('r', 'p')
  AND NOT EXISTS (
      SELECT FROM pg_catalog.pg_attribute AS a
      WHERE a.attrelid = t.oid AND a.attname = 'sub_account_id' AND NOT a.attisdropped
        AND a.attnotnull AND a.atttypid = 'pg_catalog.uuid'::regtype)
"""

# Citus keeps a sequence unique across nodes by putting the node id in its high bits: a narrower
# sequence, or a narrower column it feeds, overflows on the first insert made on a worker.
NARROW_SEQUENCES = f"""
SELECT format('sequence %I.%I is %s', n.nspname, q.relname, format_type(s.seqtypid, NULL))
FROM pg_catalog.pg_sequence AS s
JOIN pg_catalog.pg_class AS q ON q.oid = s.seqrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = q.relnamespace
WHERE s.seqtypid <> 'pg_catalog.int8'::regtype
  AND (n.nspname = 'tenant_data' OR n.nspname ~ {TENANT} OR EXISTS (
      SELECT FROM pg_catalog.pg_depend AS d
      JOIN pg_catalog.pg_class AS t ON t.oid = d.refobjid
      JOIN pg_catalog.pg_namespace AS tn ON tn.oid = t.relnamespace
      WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = q.oid
        AND d.refclassid = 'pg_catalog.pg_class'::regclass AND tn.nspname = 'tenant_data'
      UNION ALL
      SELECT FROM pg_catalog.pg_depend AS d
      JOIN pg_catalog.pg_attrdef AS ad ON ad.oid = d.objid
      JOIN pg_catalog.pg_class AS t ON t.oid = ad.adrelid
      JOIN pg_catalog.pg_namespace AS tn ON tn.oid = t.relnamespace
      WHERE d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.refobjid = q.oid
        AND d.refclassid = 'pg_catalog.pg_class'::regclass AND tn.nspname = 'tenant_data'))
UNION ALL
SELECT format('column %I.%I.%I is %s', n.nspname, t.relname, a.attname,
              format_type(a.atttypid, NULL))
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_class AS t ON t.oid = a.attrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.relnamespace
LEFT JOIN pg_catalog.pg_attrdef AS ad ON ad.adrelid = t.oid AND ad.adnum = a.attnum
WHERE n.nspname = 'tenant_data' AND a.attnum > 0 AND NOT a.attisdropped
  AND a.atttypid <> 'pg_catalog.int8'::regtype
  AND (a.attidentity <> '' OR pg_get_expr(ad.adbin, ad.adrelid) LIKE '%nextval(%')
"""

# Partitions of a tenant_data table inside tenant_data are fine (one level of them); any other
# inheritance, and any foreign table, cannot be distributed.
INHERITANCE_AND_FOREIGN_TABLES = f"""
SELECT format('%I.%I inherits %I.%I', cn.nspname, c.relname, pn.nspname, p.relname)
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_namespace AS cn ON cn.oid = c.relnamespace
JOIN pg_catalog.pg_class AS p ON p.oid = i.inhparent
JOIN pg_catalog.pg_namespace AS pn ON pn.oid = p.relnamespace
WHERE (cn.nspname = 'tenant_data' OR cn.nspname ~ {TENANT}
       OR pn.nspname = 'tenant_data' OR pn.nspname ~ {TENANT})
  AND NOT (c.relispartition AND cn.nspname = 'tenant_data' AND pn.nspname = 'tenant_data'
           AND NOT p.relispartition)
UNION ALL
SELECT format('foreign table %I.%I', n.nspname, c.relname)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind = 'f' AND (n.nspname = 'tenant_data' OR n.nspname ~ {TENANT})
"""

# A tenant schema is its views and its alembic_version table (with that table's own index and
# row type); its sequences are also counted in NARROW_SEQUENCES, its types in CUSTOM_TYPES.
TENANT_SCHEMA_OBJECTS = f"""
SELECT format('%I.%I (relkind %s)', n.nspname, c.relname, c.relkind)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
WHERE n.nspname ~ {TENANT} AND c.relkind <> 'v'
  AND NOT (c.relkind = 'r' AND c.relname = 'alembic_version')
  AND NOT (c.relkind = 'i' AND t.relname = 'alembic_version')
UNION ALL
SELECT format('%I.%I() (prokind %s)', n.nspname, p.proname, p.prokind)
FROM pg_catalog.pg_proc AS p
JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
WHERE n.nspname ~ {TENANT}
"""

# Enums, domains, ranges, stand-alone composite types and base types; a table's or view's own
# row type and array types are not custom types.
CUSTOM_TYPES = f"""
SELECT format('%I.%I (typtype %s)', n.nspname, t.typname, t.typtype)
FROM pg_catalog.pg_type AS t
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_class AS r ON r.oid = t.typrelid
WHERE (n.nspname = 'tenant_data' OR n.nspname ~ {TENANT})
  AND (t.typtype IN ('e', 'd', 'r', 'm')
       OR (t.typtype = 'c' AND r.relkind = 'c')
       OR (t.typtype = 'b' AND t.typcategory <> 'A'))
"""

CHECKS = {
    "unique or exclusion constraints without sub_account_id": UNIQUE_WITHOUT_SUB_ACCOUNT,
    "foreign keys from tenant_data not paired on sub_account_id": FOREIGN_KEYS_NOT_ON_SUB_ACCOUNT,
    "foreign keys into tenant_data from another schema": FOREIGN_KEYS_INTO_TENANT_DATA,
    "foreign key actions Citus refuses on sub_account_id": FOREIGN_KEY_ACTIONS_CITUS_REFUSES,
    "tenant_data tables without sub_account_id uuid NOT NULL": TABLES_WITHOUT_SUB_ACCOUNT,
    "sequences or sequence-fed columns narrower than bigint": NARROW_SEQUENCES,
    "inheritance or foreign tables": INHERITANCE_AND_FOREIGN_TABLES,
    "tenant schema objects other than views and alembic_version": TENANT_SCHEMA_OBJECTS,
    "custom types in tenant_data or tenant schemas": CUSTOM_TYPES,
}


async def violations(conn: asyncpg.Connection) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rule, query in CHECKS.items():
        rows = sorted(row[0] for row in await conn.fetch(query))
        if rows:
            found[rule] = rows
    return found


async def test_migrated_catalog_has_nothing_row_based_sharding_forbids(
    pool, tenant, tenant_second
) -> None:
    async with pool.acquire() as conn:
        views = await conn.fetch(
            f"""SELECT n.nspname, count(c.oid) AS views FROM pg_catalog.pg_namespace AS n
                LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relkind = 'v'
                WHERE n.nspname ~ {TENANT} GROUP BY n.nspname"""
        )
        shared = await conn.fetchval(
            """SELECT count(*) FROM pg_catalog.pg_class AS c
               JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = 'tenant_data' AND c.relkind = 'r'"""
        )
        found = await violations(conn)
    schemas = {row["nspname"]: row["views"] for row in views}
    # Not a vacuous pass: the shared tables are there, and both tenants' schemas full of views.
    assert shared > 1
    assert schemas.get(tenant.schema, 0) > 1 and schemas.get(tenant_second.schema, 0) > 1
    assert found == {}, "\n".join(
        f"{rule}:\n  " + "\n  ".join(rows) for rule, rows in found.items()
    )


async def test_the_catalog_checks_catch_each_forbidden_construct(pool, tenant) -> None:
    # Given one of each forbidden thing in tenant_data, control and a scratch tenant schema
    # (rolled back afterwards).
    scratch = f"t_{uuid.uuid4().hex}"
    statements = [
        "CREATE TABLE tenant_data.probe_parents (sub_account_id uuid NOT NULL, id uuid NOT NULL,"
        " PRIMARY KEY (sub_account_id, id))",
        "CREATE TABLE tenant_data.probe_loose (id bigint PRIMARY KEY, label text UNIQUE,"
        " n integer GENERATED BY DEFAULT AS IDENTITY)",
        "CREATE TABLE tenant_data.probe_children (sub_account_id uuid NOT NULL,"
        " parent_id uuid, owner_id uuid REFERENCES control.sub_accounts (id),"
        " during tstzrange, EXCLUDE USING gist (during WITH &&),"
        " CONSTRAINT probe_crossed FOREIGN KEY (parent_id, sub_account_id)"
        " REFERENCES tenant_data.probe_parents (sub_account_id, id),"
        " CONSTRAINT probe_set_null FOREIGN KEY (sub_account_id, parent_id)"
        " REFERENCES tenant_data.probe_parents (sub_account_id, id)"
        " ON DELETE SET NULL (parent_id))",
        "CREATE UNIQUE INDEX probe_included ON tenant_data.probe_children (parent_id)"
        " INCLUDE (sub_account_id)",
        "CREATE SEQUENCE control.probe_small AS smallint",
        "ALTER TABLE tenant_data.probe_children"
        " ADD COLUMN ticket integer DEFAULT nextval('control.probe_small')",
        "CREATE TABLE control.probe_refs (sub_account_id uuid, parent_id uuid,"
        " FOREIGN KEY (sub_account_id, parent_id)"
        " REFERENCES tenant_data.probe_parents (sub_account_id, id))",
        "CREATE TABLE tenant_data.probe_heirs () INHERITS (control.probe_refs)",
        "CREATE TYPE tenant_data.probe_mood AS ENUM ('happy', 'sad')",
        f'CREATE SCHEMA "{scratch}"',
        f'CREATE VIEW "{scratch}".probe_parents AS SELECT * FROM tenant_data.probe_parents',
        f'CREATE TABLE "{scratch}".alembic_version (version_num varchar(32) PRIMARY KEY)',
        f'CREATE TABLE "{scratch}".stray (x integer)',
        f'CREATE SEQUENCE "{scratch}".counter',
        f'CREATE FUNCTION "{scratch}".probe() RETURNS integer LANGUAGE sql AS $$SELECT 1$$',
        f'CREATE DOMAIN "{scratch}".positive AS integer CHECK (VALUE > 0)',
        f'CREATE TYPE "{scratch}".pair AS (a integer, b integer)',
    ]
    # Creating a foreign-data wrapper takes a superuser.
    foreign_table = [
        "CREATE FOREIGN DATA WRAPPER probe_fdw",
        "CREATE SERVER probe_server FOREIGN DATA WRAPPER probe_fdw",
        f'CREATE FOREIGN TABLE "{scratch}".remote (x integer) SERVER probe_server',
    ]
    async with pool.acquire() as conn:
        superuser = await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = user")
        transaction = conn.transaction()
        await transaction.start()
        try:
            for statement in statements + (foreign_table if superuser else []):
                await conn.execute(statement)
            # When the checks run.
            found = await violations(conn)
        finally:
            await transaction.rollback()
    # Then every construct is reported, under its rule.
    joined = {rule: "\n".join(rows) for rule, rows in found.items()}
    unique = joined["unique or exclusion constraints without sub_account_id"]
    assert "tenant_data.probe_loose CREATE UNIQUE INDEX probe_loose_pkey" in unique
    assert "tenant_data.probe_loose CREATE UNIQUE INDEX probe_loose_label_key" in unique
    assert "tenant_data.probe_children CREATE UNIQUE INDEX probe_included" in unique
    assert "tenant_data.probe_children EXCLUDE USING gist (during WITH &&)" in unique
    assert "probe_parents" not in unique
    unpaired = joined["foreign keys from tenant_data not paired on sub_account_id"]
    assert "tenant_data.probe_children -> control.sub_accounts" in unpaired
    assert "tenant_data.probe_children -> tenant_data.probe_parents (probe_crossed)" in unpaired
    assert "probe_set_null" not in unpaired
    assert (
        "control.probe_refs -> tenant_data.probe_parents"
        in joined["foreign keys into tenant_data from another schema"]
    )
    assert (
        "ON DELETE SET NULL (parent_id)"
        in joined["foreign key actions Citus refuses on sub_account_id"]
    )
    without = joined["tenant_data tables without sub_account_id uuid NOT NULL"]
    assert "tenant_data.probe_loose" in without
    assert "tenant_data.probe_heirs" in without  # sub_account_id there may be NULL
    narrow = joined["sequences or sequence-fed columns narrower than bigint"]
    assert "sequence tenant_data.probe_loose_n_seq is integer" in narrow
    assert "sequence control.probe_small is smallint" in narrow
    assert "column tenant_data.probe_loose.n is integer" in narrow
    assert "column tenant_data.probe_children.ticket is integer" in narrow
    inherited = joined["inheritance or foreign tables"]
    assert "tenant_data.probe_heirs inherits control.probe_refs" in inherited
    assert not superuser or f"foreign table {scratch}.remote" in inherited
    objects = joined["tenant schema objects other than views and alembic_version"]
    assert f"{scratch}.stray (relkind r)" in objects
    assert f"{scratch}.counter (relkind S)" in objects
    assert f"{scratch}.probe() (prokind f)" in objects
    assert "alembic_version" not in objects and "probe_parents" not in objects
    types = joined["custom types in tenant_data or tenant schemas"]
    assert all(
        name in types
        for name in ("tenant_data.probe_mood", f"{scratch}.positive", f"{scratch}.pair")
    )
    assert "probe_parents" not in types  # a table's or view's row type is not a custom type
    assert tenant.schema not in "\n".join(joined.values())
