"""SQLAlchemy Core metadata: the single source alembic migrations are checked against.

`control_metadata` holds the tables of the `control` schema; `tenant_metadata` the tables every
tenant schema has. Tenant tables name no schema: they live wherever `search_path` points.
Each feature's tenant tables sit in a module of their own and are imported here.
"""

from tenancy.tables import control, tenant  # noqa: F401
from tenancy.tables.base import control_metadata, tenant_metadata

__all__ = ["control_metadata", "tenant_metadata"]
