"""The tenant scope: one sub-account's part of the database, resolved once (by authentication
for a request, from the due-work row for a job) and handed to the feature services, which run
their tenant SQL in `scope.transaction()` and never see a schema name."""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import asyncpg

from tenancy.db import schema_name_for, tenant_transaction
from tenancy.errors import not_found
from tenancy.principals import Principal

SELECT_ACTIVE = """
SELECT EXISTS (SELECT 1 FROM control.sub_accounts WHERE id = $1 AND status = 'active')
"""


@dataclass(frozen=True)
class TenantScope:
    pool: asyncpg.Pool
    sub_account_id: uuid.UUID
    schema: str
    # The key that asked, for a request; None for work the service does on its own (a job).
    principal: Principal | None = None

    def transaction(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A transaction whose unqualified table names are this sub-account's tables."""
        return tenant_transaction(self.pool, self.schema)

    @property
    def organisation_id(self) -> uuid.UUID | None:
        return self.principal.organisation_id if self.principal is not None else None

    @classmethod
    def of_principal(cls, pool: asyncpg.Pool, principal: Principal) -> TenantScope:
        if principal.sub_account_id is None or principal.schema is None:
            raise ValueError("an agency key has no tenant scope")
        return cls(pool, principal.sub_account_id, principal.schema, principal)

    @classmethod
    def of_sub_account(cls, pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> TenantScope:
        return cls(pool, sub_account_id, schema_name_for(sub_account_id))

    @classmethod
    async def of_active_sub_account(
        cls, pool: asyncpg.Pool, sub_account_id: uuid.UUID
    ) -> TenantScope | None:
        """The sub-account a signed link or a carrier's webhook names, while it is active;
        None when it is unknown, suspended or deleted (those get nothing done)."""
        if not await pool.fetchval(SELECT_ACTIVE, sub_account_id):
            return None
        return cls.of_sub_account(pool, sub_account_id)

    @classmethod
    async def of_active_or_404(cls, pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> TenantScope:
        """`of_active_sub_account`, or 404 `not_found` (a carrier webhook naming no tenant)."""
        scope = await cls.of_active_sub_account(pool, sub_account_id)
        if scope is None:
            raise not_found("sub-account")
        return scope
