"""Row-level security on every tenant table, and the role tenant statements run under
(CONTRACT 18, issue 34).

- Role `switchboard_tenant`: no login, no superuser, owns nothing, cannot bypass row-level
  security. A tenant transaction switches to it with SET LOCAL ROLE (tenancy.db), so one
  DATABASE_URL serves and PgBouncer's transaction mode keeps working. The role that runs this
  migration is made a member, so it may switch to it.
- Every table of `tenant_data` has row-level security enabled and forced, with one policy: a row
  is seen and written only when its `sub_account_id` is the transaction's
  `switchboard.sub_account_id` setting. A transaction that set no tenant sees and writes none.
- The control tables a tenant transaction reads or writes (its own sub-account row, its plan,
  its due-work rows) are granted to the role with policies limiting it to its own rows; the
  role gets nothing else of `control` (no keys, users, invitations or other sub-accounts).
- Each existing tenant schema's views are granted to the role here (GRANT takes no lock on a
  view); each view turns `security_invoker` in tenant revision t0020, which needs the view's
  lock and so runs tenant by tenant. Until then a view reads as its owner, under the same forced
  policy, so a tenant sees the same rows either way.

Revision ID: c0012
Revises: c0011
Create Date: 2026-12-02 04:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "c0012"
down_revision: str | None = "c0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "switchboard_tenant"
TENANT = "NULLIF(current_setting('switchboard.sub_account_id', true), '')::uuid"

# Roles belong to the whole server: another database on it may be creating the role at the same
# moment (parallel test runs, several deployments), hence the exceptions taken as done.
CREATE_ROLE = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        CREATE ROLE {ROLE} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END $$;
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'GRANT {ROLE} TO ' || quote_ident(current_user);
    END IF;
END $$;
"""

SHARED_TABLES = f"""
GRANT USAGE ON SCHEMA tenant_data TO {ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA tenant_data TO {ROLE};
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA tenant_data TO {ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA tenant_data
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA tenant_data GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {ROLE};
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'tenant_data' LOOP
        EXECUTE 'ALTER TABLE tenant_data.' || quote_ident(t.tablename)
            || ' ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY';
        EXECUTE 'CREATE POLICY tenant_rows ON tenant_data.' || quote_ident(t.tablename)
            || $p$ USING (sub_account_id = {TENANT})$p$;
    END LOOP;
END $$;
"""

# Not forced: the control role (their owner) reads every row, as the sweeper and operators must.
CONTROL_TABLES = f"""
GRANT USAGE ON SCHEMA control TO {ROLE};
GRANT SELECT ON control.sub_accounts, control.plans TO {ROLE};
GRANT SELECT ON control.memberships TO {ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON control.due_work TO {ROLE};
GRANT SELECT, INSERT, DELETE ON control.phone_number_directory TO {ROLE};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA control TO {ROLE};
ALTER TABLE control.sub_accounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_own_row ON control.sub_accounts TO {ROLE} USING (id = {TENANT});
ALTER TABLE control.plans ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_own_plan ON control.plans TO {ROLE} USING (
    id = (SELECT s.plan_id FROM control.sub_accounts AS s WHERE s.id = {TENANT})
);
ALTER TABLE control.memberships ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_own_rows ON control.memberships TO {ROLE} USING (sub_account_id = {TENANT});
ALTER TABLE control.due_work ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_own_rows ON control.due_work TO {ROLE} USING (sub_account_id = {TENANT});
ALTER TABLE control.phone_number_directory ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_own_rows ON control.phone_number_directory TO {ROLE}
    USING (sub_account_id = {TENANT});
"""

TENANT_SCHEMAS = f"""
DO $$
DECLARE s record;
BEGIN
    FOR s IN SELECT schema_name FROM control.sub_accounts
             WHERE to_regnamespace(schema_name) IS NOT NULL LOOP
        EXECUTE 'GRANT USAGE ON SCHEMA ' || quote_ident(s.schema_name) || ' TO {ROLE}';
    END LOOP;
END $$;
DO $$
DECLARE v record;
BEGIN
    FOR v IN SELECT schemaname, viewname FROM pg_views WHERE schemaname ~ '^t_[0-9a-f]{{32}}$' LOOP
        EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON ' || quote_ident(v.schemaname) || '.'
            || quote_ident(v.viewname) || ' TO {ROLE}';
    END LOOP;
END $$;
"""


def upgrade() -> None:
    op.execute(CREATE_ROLE)
    op.execute(SHARED_TABLES)
    op.execute(CONTROL_TABLES)
    op.execute(TENANT_SCHEMAS)


def downgrade() -> None:
    op.execute("""
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'tenant_data' LOOP
        EXECUTE 'DROP POLICY IF EXISTS tenant_rows ON tenant_data.' || quote_ident(t.tablename);
        EXECUTE 'ALTER TABLE tenant_data.' || quote_ident(t.tablename)
            || ' NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY';
    END LOOP;
END $$;
DROP POLICY IF EXISTS tenant_own_row ON control.sub_accounts;
DROP POLICY IF EXISTS tenant_own_plan ON control.plans;
DROP POLICY IF EXISTS tenant_own_rows ON control.memberships;
DROP POLICY IF EXISTS tenant_own_rows ON control.due_work;
DROP POLICY IF EXISTS tenant_own_rows ON control.phone_number_directory;
ALTER TABLE control.sub_accounts DISABLE ROW LEVEL SECURITY;
ALTER TABLE control.plans DISABLE ROW LEVEL SECURITY;
ALTER TABLE control.memberships DISABLE ROW LEVEL SECURITY;
ALTER TABLE control.due_work DISABLE ROW LEVEL SECURITY;
ALTER TABLE control.phone_number_directory DISABLE ROW LEVEL SECURITY;
""")
    # The role's grants stay with the objects; the role itself may serve other databases.
