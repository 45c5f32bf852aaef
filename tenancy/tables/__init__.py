"""SQLAlchemy Core metadata: the single source alembic migrations are checked against.

`control_metadata` holds the tables of the `control` schema; `tenant_metadata` the tables every
tenant schema has. Tenant tables name no schema: they live wherever `search_path` points.
Each feature's tables sit in a module of their own in this package; all are imported here.
"""

import importlib
import pkgutil

from tenancy.tables.base import control_metadata, tenant_metadata

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["control_metadata", "tenant_metadata"]
