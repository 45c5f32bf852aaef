"""Response bodies against their declared models: checked when SWITCHBOARD_VALIDATE_RESPONSES is
on (as in this suite), passed straight to the encoder when it is off (production)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from api.validation import validate_response
from cli.wiring import build_app as create_app
from tenancy.settings import get_settings


class Thing(BaseModel):
    status: str
    id: uuid.UUID
    price: decimal.Decimal
    at: dt.datetime
    note: str | None = None


THING_ID = uuid.UUID("6a3f4f0e-8a8e-4a36-9d3e-2f6d1e0c7b11")
GOOD = {
    "status": "success",
    "id": THING_ID,
    "price": decimal.Decimal("10.50"),
    "at": dt.datetime(2026, 11, 23, 4, 5, 6, 789123, tzinfo=dt.UTC),
}


def app_answering(body: dict[str, Any], check: bool) -> Any:
    settings = get_settings().model_copy(update={"validate_responses": check})
    app = create_app(settings)

    @app.get("/thing")
    @validate_response(Thing, 200)
    async def thing() -> dict[str, Any]:
        return body

    return app


async def test_a_body_matching_its_model_is_sent_as_written() -> None:
    response = await app_answering(GOOD, check=True).test_client().get("/thing")
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "id": str(THING_ID),
        "price": 10.5,
        "at": "2026-11-23T04:05:06.789Z",
    }


@pytest.mark.parametrize(
    "body",
    [
        {**GOOD, "secret_column": "x"},  # a key the model does not declare
        {**GOOD, "id": "not-a-uuid"},  # a value of the wrong type
        {key: value for key, value in GOOD.items() if key != "price"},  # a required field missing
    ],
)
async def test_a_body_that_differs_from_its_model_is_refused_when_checking(
    body: dict[str, Any],
) -> None:
    response = await app_answering(body, check=True).test_client().get("/thing")
    assert response.status_code == 500
    assert (await response.get_json())["error"]["code"] == "internal_error"


async def test_without_checking_the_handler_body_goes_straight_to_the_encoder() -> None:
    body = {**GOOD, "secret_column": "x"}
    response = await app_answering(body, check=False).test_client().get("/thing")
    assert response.status_code == 200
    assert (await response.get_json())["secret_column"] == "x"


async def test_the_declared_model_still_documents_the_route() -> None:
    app = app_answering(GOOD, check=False)
    async with app.test_app():
        spec = await (await app.test_client().get("/openapi.json")).get_json()
    schema = spec["paths"]["/thing"]["get"]["responses"]["200"]["content"]["application/json"]
    assert schema["schema"]["title"] == "Thing"
    assert set(schema["schema"]["properties"]) == {"status", "id", "price", "at", "note"}
