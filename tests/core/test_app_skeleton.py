"""The app skeleton: error envelope, request ids, version header, OpenAPI and docs, probes."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.factories import CREATE
from tests.helpers import count_sub_accounts

API_VERSION = "2026.10.07"


@asynccontextmanager
async def separate_app(setup: Any = None, **settings: Any) -> AsyncIterator[Any]:
    """A fresh app (not the shared one), optionally changed by `setup(app)` before serving."""
    from cli.wiring import build_app as create_app
    from tenancy.settings import Settings

    application = create_app(Settings(**settings))
    if setup is not None:
        setup(application)
    async with application.test_app() as test_app:
        yield test_app.test_client()


def assert_envelope(body: dict, path: str, code: str) -> None:
    if path.startswith("/functions/v1"):
        assert body["success"] is False and "status" not in body
    else:
        assert body["status"] == "error" and "success" not in body
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


# --- error envelope -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/webhooks/inbound/nope",
        "/functions/v1/nope",
        "/functions/v1/agency/sub-accounts/x/y/z",
    ],
)
async def test_unknown_route_is_404_in_envelope(client, path):
    response = await client.get(path)
    assert response.status_code == 404
    assert_envelope(await response.get_json(), path, "not_found")


NUMBER = "/webhooks/inbound/phone-numbers/0b7e8a52-5f0e-4c55-9d6e-2d1b0c9f4a11"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        # `purchase` also fits /phone-numbers/<number_id>, whose GET and DELETE are not its own.
        ("OPTIONS", "/webhooks/inbound/phone-numbers/purchase", {"POST", "OPTIONS"}),
        ("PUT", "/webhooks/inbound/phone-numbers/purchase", {"POST", "OPTIONS"}),
        ("OPTIONS", NUMBER, {"GET", "HEAD", "DELETE", "OPTIONS"}),
        ("PUT", NUMBER, {"GET", "HEAD", "DELETE", "OPTIONS"}),
        ("OPTIONS", f"{NUMBER}/agent", {"POST", "DELETE", "OPTIONS"}),
        # Not the number whose id is "import" (400 invalid_uuid): the import, which has no GET.
        ("GET", "/webhooks/inbound/phone-numbers/import", {"POST", "OPTIONS"}),
        ("DELETE", "/webhooks/inbound/phone-numbers/purchase", {"POST", "OPTIONS"}),
    ],
)
async def test_allow_names_the_methods_of_the_resource_the_path_names(
    client, tenant, method, path, allowed
):
    response = await client.open(path, method=method, headers=tenant.headers)
    assert response.status_code == (200 if method == "OPTIONS" else 405)
    assert set(response.headers["Allow"].split(", ")) == allowed


def _documented_paths() -> list[tuple[str, set[str]]]:
    from cli.wiring import build_app as create_app

    app = create_app()  # held: the provider refers to the app weakly
    document = app.extensions["QUART_SCHEMA"].openapi_provider.schema()
    operations = ("get", "post", "put", "patch", "delete")
    return [
        (path, {method.upper() for method in methods if method in operations})
        for path, methods in sorted(document["paths"].items())
    ]


@pytest.mark.parametrize(("path", "documented"), _documented_paths())
async def test_options_allow_names_exactly_the_documented_methods(client, tenant, path, documented):
    """Allow on OPTIONS is the document's methods, OPTIONS, and HEAD beside a GET: nothing the
    document leaves out (the invitation link's page is a GET for browsers beside the POST)."""
    concrete = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)
    response = await client.options(concrete, headers=tenant.headers)
    assert response.status_code == 200
    head = {"HEAD"} if "GET" in documented else set()
    assert set(response.headers["Allow"].split(", ")) == documented | head | {"OPTIONS"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", CREATE),
        ("DELETE", "/webhooks/inbound/team-users"),
        ("PUT", "/functions/v1/agency/plans"),
        ("POST", "/healthz"),
    ],
)
async def test_wrong_method_is_405_in_envelope(client, method, path):
    response = await client.open(path, method=method)
    assert response.status_code == 405
    assert_envelope(await response.get_json(), path, "method_not_allowed")
    assert response.headers.get("Allow")


async def test_body_over_max_is_413_and_writes_nothing(client, agency, pool):
    from tenancy.settings import get_settings

    too_big = (
        b'{"email": "big@example.com", "name": "'
        + b"x" * (get_settings().max_body_bytes + 10)
        + b'"}'
    )
    response = await client.post(
        CREATE, data=too_big, headers={**agency.headers, "content-type": "application/json"}
    )
    assert response.status_code == 413
    assert_envelope(await response.get_json(), CREATE, "payload_too_large")
    assert response.headers["X-Request-ID"]
    assert await count_sub_accounts(pool, agency.id) == 0


async def test_body_limit_follows_the_setting(migrated, agency, pool):
    async with separate_app(max_body_bytes=200) as small:
        body = {"email": "x@example.com", "name": "y" * 300}
        response = await small.post(CREATE, json=body, headers=agency.headers)
        assert response.status_code == 413
        ok = await small.post(
            CREATE, json={"email": "x@example.com", "name": "Small"}, headers=agency.headers
        )
        assert ok.status_code == 201


def _add_failing_routes(application: Any) -> None:
    async def explode() -> None:
        raise RuntimeError("SELECT secret FROM control.api_keys -- password=hunter2")

    application.add_url_rule("/functions/v1/explode", "explode_functions", explode)
    application.add_url_rule("/webhooks/inbound/explode", "explode_inbound", explode)


@pytest.mark.parametrize("path", ["/functions/v1/explode", "/webhooks/inbound/explode"])
async def test_unhandled_exception_is_500_without_internals(migrated, path):
    async with separate_app(_add_failing_routes) as failing:
        response = await failing.get(path, headers={"x-request-id": "trace-500"})
    assert response.status_code == 500
    text = await response.get_data(as_text=True)
    for leak in ("SELECT", "secret", "hunter2", "RuntimeError", "Traceback", "api_keys"):
        assert leak not in text
    assert_envelope(await response.get_json(), path, "internal_error")
    assert response.headers["X-Request-ID"] == "trace-500"
    assert response.headers["X-API-Version"] == API_VERSION


async def test_the_shared_app_has_no_failing_route(client):
    assert (await client.get("/functions/v1/explode")).status_code == 404


# --- request ids and version ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/healthz"),
        ("GET", "/nope"),
        ("GET", "/webhooks/inbound/team-users"),
        ("GET", CREATE),
        ("GET", "/openapi.json"),
    ],
)
async def test_every_response_has_request_id_and_version(client, method, path):
    response = await client.open(path, method=method)
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,128}", response.headers["X-Request-ID"])
    assert response.headers["X-API-Version"] == API_VERSION


async def test_request_ids_differ_per_request(client):
    first = await client.get("/healthz")
    second = await client.get("/healthz")
    assert first.headers["X-Request-ID"] != second.headers["X-Request-ID"]


async def test_sane_request_id_is_echoed(client, tenant):
    for path, headers in (
        ("/healthz", {}),
        ("/webhooks/inbound/team-users", tenant.headers),
        ("/nope", {}),
    ):
        response = await client.get(path, headers={**headers, "X-Request-ID": "abc-123.DEF_9"})
        assert response.headers["X-Request-ID"] == "abc-123.DEF_9"


@pytest.mark.parametrize("incoming", ["has space", "x" * 200, "<script>", "a\tb", "ü-unicode"])
async def test_insane_request_id_is_replaced(client, incoming):
    response = await client.get("/healthz", headers={"X-Request-ID": incoming})
    assigned = response.headers["X-Request-ID"]
    assert assigned != incoming
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,128}", assigned)


async def test_request_id_on_success_of_functions_route(client, agency):
    response = await client.get(
        "/functions/v1/agency/sub-accounts",
        headers={**agency.headers, "x-request-id": str(uuid.UUID(int=7))},
    )
    assert response.headers["X-Request-ID"] == str(uuid.UUID(int=7))


# --- envelopes by prefix --------------------------------------------------------------------


async def test_functions_errors_use_success_false(client):
    response = await client.post("/functions/v1/agency/plans", json={})
    body = await response.get_json()
    assert response.status_code == 401
    assert body == {
        "success": False,
        "error": {"code": "missing_api_key", "message": body["error"]["message"]},
    }


async def test_inbound_errors_use_status_error(client):
    response = await client.get("/webhooks/inbound/team-users")
    body = await response.get_json()
    assert body == {
        "status": "error",
        "error": {"code": "missing_api_key", "message": body["error"]["message"]},
    }


async def test_functions_validation_error_has_details(client, agency):
    response = await client.post(
        "/functions/v1/agency/plans", json={"slug": 5, "name": "X"}, headers=agency.headers
    )
    body = await response.get_json()
    assert body["success"] is False
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["details"][0]["field"] == "slug"


# --- OpenAPI, docs, probes ------------------------------------------------------------------


async def test_openapi_document(client):
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    spec = await response.get_json()
    assert spec["openapi"].startswith("3.1")
    assert spec["info"]["version"] == API_VERSION
    for path in (
        "/functions/v1/create-subaccount-webhook",
        "/functions/v1/crm-api/add-subaccount-user",
        "/functions/v1/accept-invitation",
        "/functions/v1/agency/plans",
        "/functions/v1/agency/sub-accounts",
        "/webhooks/inbound/team-users",
    ):
        assert path in spec["paths"], path
    assert "delete" in spec["paths"]["/webhooks/inbound/phone-numbers/{number_id}/agent"]
    queries = {
        path: {p["name"] for p in spec["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        for path in (
            "/webhooks/inbound/campaigns",
            "/webhooks/inbound/invoices",
            "/webhooks/inbound/calls",
            "/webhooks/inbound/number-pools",
        )
    }
    assert queries == {
        "/webhooks/inbound/campaigns": {"status", "limit", "offset"},
        "/webhooks/inbound/invoices": {"status", "contact_id", "limit", "offset"},
        "/webhooks/inbound/calls": {
            "contact_id",
            "agent_id",
            "status",
            "direction",
            "limit",
            "offset",
        },
        "/webhooks/inbound/number-pools": {"limit", "offset"},
    }
    contacts = {
        p["name"]: p
        for p in spec["paths"]["/webhooks/inbound/contacts"]["get"]["parameters"]
        if p["in"] == "query"
    }
    assert {"q", "email", "phone", "tag", "limit", "offset"} <= set(contacts)
    assert (contacts["q"]["schema"]["minLength"], contacts["q"]["schema"]["maxLength"]) == (2, 100)
    assert contacts["tag"]["schema"]["type"] == "array"
    create = spec["paths"]["/functions/v1/create-subaccount-webhook"]["post"]
    assert "201" in create["responses"]
    assert "/healthz" not in spec["paths"]


async def test_docs_page_uses_local_assets(client):
    response = await client.get("/docs")
    assert response.status_code == 200
    assert response.content_type.startswith("text/html")
    html = await response.get_data(as_text=True)
    assert "<head>" in html and "/openapi.json" in html
    assets = re.findall(r'(?:src|href)="(/docs/assets/[^"]+)"', html)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    assert "cdn" not in html.lower() and "https://" not in html
    for asset in assets:
        served = await client.get(asset)
        assert served.status_code == 200, asset
        assert len(await served.get_data()) > 1000


async def test_docs_assets_do_not_escape_their_folder(client):
    response = await client.get("/docs/assets/../../tenancy/settings.py")
    assert response.status_code == 404
    response = await client.get("/docs/assets/no-such-file.js")
    assert response.status_code == 404
    assert_envelope(await response.get_json(), "/docs", "not_found")


async def test_healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert await response.get_json() == {"status": "ok"}


async def test_readyz_checks_database_and_redis(client):
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "ok",
        "checks": {"database": "ok", "redis": "ok"},
    }


async def test_success_bodies_under_functions_carry_success_true(client, agency):
    body = await (
        await client.get("/functions/v1/agency/sub-accounts", headers=agency.headers)
    ).get_json()
    assert body["success"] is True


# --- text PostgreSQL cannot store -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CREATE, {"email": "nul@example.com", "name": "Acme\u0000"}, "name"),
        (CREATE, {"email": "nul@example.com", "locationID": "loc\u0000"}, "locationID"),
        (CREATE, {"email": "nul@example.com", "name": "\ud800 lone"}, "name"),
        (
            "/functions/v1/agency/plans",
            {"slug": "nul", "name": "A", "features": {"k": ["\u0000"]}},
            "features.k.0",
        ),
        (
            "/functions/v1/agency/plans",
            {"slug": "nul", "name": "A", "features": {"k\u0000": 1}},
            "features",
        ),
    ],
)
async def test_nul_or_lone_surrogate_in_body_is_400(client, agency, pool, path, body, field):
    response = await client.post(path, json=body, headers=agency.headers)
    assert response.status_code == 400
    payload = await response.get_json()
    assert payload["error"]["code"] == "validation_error"
    assert payload["error"]["details"][0]["field"] == field
    assert await count_sub_accounts(pool, agency.id) == 0
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.plans WHERE organisation_id = $1", agency.id
        )
        == 0
    )


async def test_nul_in_query_or_path_is_400(client, agency):
    response = await client.get(
        "/functions/v1/agency/sub-accounts?limit=5%00", headers=agency.headers
    )
    assert response.status_code == 400
    response = await client.post(
        "/functions/v1/agency/sub-accounts/%00/api-keys", headers=agency.headers
    )
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("path", "content_type", "named"),
    [
        (
            "/webhooks/inbound/contacts",
            "application/x-www-form-urlencoded",
            "'application/x-www-form-urlencoded'",
        ),
        (
            "/webhooks/inbound/companies",
            "application/x-www-form-urlencoded",
            "'application/x-www-form-urlencoded'",
        ),
        ("/webhooks/inbound/companies", None, "no Content-Type"),
    ],
)
async def test_a_json_body_without_the_json_content_type_is_told_so_by_name(
    client, tenant, pool, path, content_type, named
):
    from tests.helpers import tenant_sql

    # given a JSON object sent as `curl -d` sends it (a form type) or with no type at all
    headers = {**tenant.headers, **({"content-type": content_type} if content_type else {})}
    response = await client.post(
        path, data=b'{"name": "Acme", "email": "a@example.com"}', headers=headers
    )
    # then 400 names the Content-Type, and nothing is written
    assert response.status_code == 400
    error = (await response.get_json())["error"]
    assert error["code"] == "validation_error"
    assert "Content-Type: application/json" in error["message"] and named in error["message"]
    for table in ("contacts", "companies"):
        assert (await tenant_sql(pool, tenant, f"SELECT count(*) FROM {table}"))[0][0] == 0


async def test_a_body_that_is_json_but_no_object_keeps_its_message(client, tenant):
    response = await client.post(
        "/webhooks/inbound/companies",
        data=b"[1, 2]",
        headers={**tenant.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert (await response.get_json())["error"]["message"] == "the body must be a JSON object"
