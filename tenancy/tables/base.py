"""The two MetaData objects and column helpers shared by every table module."""

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

CONTROL_SCHEMA = "control"

control_metadata = sa.MetaData(schema=CONTROL_SCHEMA, naming_convention=NAMING_CONVENTION)
tenant_metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def uuid_pk() -> sa.Column[Any]:
    return sa.Column(
        "id", pg.UUID(as_uuid=True), primary_key=True, server_default=sa.text("gen_random_uuid()")
    )


def created_at() -> sa.Column[Any]:
    return sa.Column(
        "created_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")
    )


def updated_at() -> sa.Column[Any]:
    return sa.Column(
        "updated_at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")
    )


MONEY = sa.Numeric(12, 2)
