"""The OpenAPI document states the rules every route shares (no server needed)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.openapi import BOUND_KEYWORDS
from api.types import UUID_PATTERN

OPERATIONS_OF = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    from cli.wiring import build_app as create_app

    app = create_app()  # held: the provider refers to the app weakly
    return app.extensions["QUART_SCHEMA"].openapi_provider.schema()  # type: ignore[no-any-return]


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method in OPERATIONS_OF:
                yield path, method, operation


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)


def test_path_ids_are_uuids(document: dict[str, Any]) -> None:
    for path, method, operation in _operations(document):
        for parameter in operation["parameters"]:
            if parameter["in"] == "path" and parameter["name"].endswith("_id"):
                assert parameter["schema"]["format"] == "uuid", (method, path)
                assert parameter["schema"]["pattern"] == UUID_PATTERN, (method, path)


def test_lists_document_their_page_bounds(document: dict[str, Any]) -> None:
    lists = 0
    for path, method, operation in _operations(document):
        ok = operation["responses"].get("200", {})
        answer = ok.get("content", {}).get("application/json", {})
        fields = answer.get("schema", {})
        if "$ref" in fields:
            fields = document["components"]["schemas"][fields["$ref"].rsplit("/", 1)[-1]]
        if {"limit", "offset"} <= set(fields.get("properties", {})):
            query = {p["name"]: p["schema"] for p in operation["parameters"] if p["in"] == "query"}
            assert {"limit", "offset"} <= set(query), (method, path)
            assert query["offset"]["minimum"] == 0 and "maximum" in query["offset"], path
            lists += 1
    assert lists >= 9


def test_number_bounds_use_json_schema_names(document: dict[str, Any]) -> None:
    for node in _nodes(document):
        if node.get("type") in ("number", "integer"):
            assert not set(BOUND_KEYWORDS) & set(node), node


def test_created_records_link_to_their_operations(document: dict[str, Any]) -> None:
    created = document["paths"]["/webhooks/inbound/contacts"]["post"]["responses"]["201"]
    assert {
        "GET /webhooks/inbound/contacts/{contact_id}",
        "PATCH /webhooks/inbound/contacts/{contact_id}",
        "DELETE /webhooks/inbound/contacts/{contact_id}",
    } <= set(created["links"])


def _allowed_400() -> list[str]:
    """The operations schemathesis.toml lets answer 400 to a request that fits the document."""
    config = tomllib.loads((Path(__file__).resolve().parents[2] / "schemathesis.toml").read_text())
    return [
        name
        for override in config["operations"]
        if "400" in override["checks"]["positive_data_acceptance"]["expected-statuses"]
        for name in override["include-name"]
    ]


def test_operations_allowed_a_400_name_it_in_their_description(document: dict[str, Any]) -> None:
    """CONTRACT 18a: a state- or cross-field 400 is named in the operation's description and in
    the project's schemathesis configuration; a name there that is no operation is a mistake."""
    allowed = _allowed_400()
    assert len(allowed) >= 20
    for name in allowed:
        method, path = name.split(" ", 1)
        operation = document["paths"][path][method.lower()]
        text = f"{operation.get('summary', '')} {operation.get('description', '')}"
        assert "400" in text, name
