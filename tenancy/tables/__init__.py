"""SQLAlchemy Core metadata: the single source alembic migrations are checked against.

`control_metadata` holds the tables of the `control` schema; `tenant_metadata` the tables every
tenant schema shows, as views of the shared tables of `shared_metadata` (schema `tenant_data`,
derived from it in tenancy/tables/shared.py). Tenant tables name no schema: tenant SQL finds
them wherever `search_path` points.
Each feature's tables sit in a module of their own in this package; every one is listed here.
"""

from tenancy.tables import (  # noqa: F401  (each module adds its tables to the metadata)
    calendars,
    campaigns,
    contacts,
    control,
    due_work,
    idempotency,
    invoices,
    tenant,
    voice,
    webhooks,
)
from tenancy.tables.base import control_metadata, tenant_metadata
from tenancy.tables.shared import shared_metadata

__all__ = ["control_metadata", "shared_metadata", "tenant_metadata"]
