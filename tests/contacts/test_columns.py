"""A contact's columns go by name: the table, the models and the statements made from them agree,
so a new column is added to the table, the models and (if written) STORED, and nowhere by
position."""

from __future__ import annotations

import re

from api.contacts import service
from api.contacts.schemas import Contact
from tenancy.tables import tenant_metadata

TABLE = tenant_metadata.tables["contacts"]
SERVER_MANAGED = {"id", "created_at", "updated_at"}


def test_a_contact_shows_every_column_of_its_table() -> None:
    assert set(Contact.model_fields) == set(TABLE.columns.keys())
    assert service.SHOWN == tuple(Contact.model_fields)


def test_what_is_written_is_every_column_the_server_does_not_manage() -> None:
    assert set(service.STORED) == set(TABLE.columns.keys()) - SERVER_MANAGED


def test_the_statements_bind_each_column_to_its_own_parameter() -> None:
    inserted = re.search(
        r"INSERT INTO contacts \(([^)]*)\)\s*VALUES \(([^)]*)\)", service.INSERT_CONTACT
    )
    assert inserted is not None
    names = [name.strip() for name in inserted.group(1).split(",")]
    binds = [bind.strip() for bind in inserted.group(2).split(",")]
    assert names == list(service.STORED)
    assert binds == [f"${index}" for index in range(1, len(names) + 1)]
    set_list = service.UPDATE_CONTACT.split("SET", 1)[1].split("WHERE", 1)[0]
    assignments = dict(re.findall(r"(\w+) = \$(\d+)", set_list))
    assert {name: int(index) for name, index in assignments.items()} == {
        name: index for index, name in enumerate(service.STORED, start=2)
    }
