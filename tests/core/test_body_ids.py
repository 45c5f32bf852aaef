"""An id in a request body that is not a UUID is 400 invalid_uuid (CONTRACT 2), as one in the
path is: every body field the OpenAPI document declares `format: uuid`, nested and in lists too,
whatever else the body lacks. The fields come from the document, so a new one is covered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

NOT_A_UUID = "not-a-uuid"
AGENCY_PATHS = (
    "/functions/v1/create-subaccount-webhook",
    "/functions/v1/crm-api/add-subaccount-user",
    "/functions/v1/agency/",
)
# What a body needs besides the id for its route to look at the id at all: a tool's config is
# checked against its type once the rest of the body holds.
BASE_BODIES: dict[str, dict[str, Any]] = {
    "POST /webhooks/inbound/tools": {"name": "find_slots", "description": "Free times."},
}


Given = dict[tuple[Any, ...], dict[str, Any]]


def _document() -> dict[str, Any]:
    from cli.wiring import build_app as create_app

    app = create_app()  # held: the provider refers to the app weakly
    return app.extensions["QUART_SCHEMA"].openapi_provider.schema()  # type: ignore[no-any-return]


def _ids(
    schema: Any, components: dict[str, Any], path: tuple[Any, ...], given: Given
) -> Iterator[tuple[tuple[Any, ...], Given]]:
    """(where a UUID goes, the values conditions need beside it, by the level they sit at)."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    if not isinstance(schema, dict):
        return
    if schema.get("format") == "uuid":
        yield path, given
    for name, field in schema.get("properties", {}).items():
        yield from _ids(field, components, (*path, name), given)
    if "items" in schema:
        yield from _ids(schema["items"], components, (*path, 0), given)
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            condition = option.get("if", {}).get("properties", {})
            if condition and "then" in option:
                needs = {
                    name: rule["enum"][0] for name, rule in condition.items() if "enum" in rule
                }
                level = {**given.get(path, {}), **needs}
                yield from _ids(option["then"], components, path, {**given, path: level})
            else:
                yield from _ids(option, components, path, given)


def _cases() -> list[Any]:
    document = _document()
    components = document["components"]["schemas"]
    found: dict[tuple[str, tuple[Any, ...]], Given] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            for where, given in _ids(body["schema"], components, (), {}):
                found.setdefault((f"{method.upper()} {path}", where), given)
    return [
        pytest.param(label, where, given, id=f"{label} {'.'.join(map(str, where))}")
        for (label, where), given in sorted(found.items(), key=str)
    ]


def _body(where: tuple[Any, ...], given: Given, level: tuple[Any, ...] = ()) -> Any:
    """A body with NOT_A_UUID at `where`, and at each level the values its conditions need."""
    if len(level) == len(where):
        return NOT_A_UUID
    head = where[len(level)]
    inner = _body(where, given, (*level, head))
    if isinstance(head, int):
        return [inner]
    return {**given.get(level, {}), head: inner}


CASES = _cases()


def test_the_document_has_body_ids() -> None:
    labels = {case.values[0] for case in CASES}
    assert {"POST /webhooks/inbound/tools", "POST /webhooks/inbound/appointments"} <= labels
    assert len(CASES) >= 20


@pytest.mark.parametrize(("label", "where", "given"), CASES)
async def test_a_body_id_that_is_not_a_uuid_is_invalid_uuid(
    client, tenant, label, where, given
) -> None:
    method, path = label.split(" ", 1)
    concrete = path.replace("{sub_account_id}", str(tenant.id))
    while "{" in concrete:
        start = concrete.index("{")
        concrete = concrete[:start] + str(uuid.uuid4()) + concrete[concrete.index("}") + 1 :]
    key = tenant.organisation.key if path.startswith(AGENCY_PATHS) else tenant.key
    body = {**BASE_BODIES.get(label, {}), **_body(where, given)}
    response = await client.open(concrete, method=method, json=body, headers={"x-api-key": key})
    answer = await response.get_json()
    assert response.status_code == 400, (label, body, answer)
    assert answer["error"]["code"] == "invalid_uuid", (label, body, answer)
    assert answer["error"]["message"].endswith("must be a UUID")
