"""Request and response models of the invoice operations."""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
)

from api.schemas import Page
from api.types import (
    NON_BLANK,
    UUID_KEYWORDS,
    Money,
    UUIDQuery,
    UUIDText,
    WholeNumber,
    document,
    required_one_of,
)

MAX_QUANTITY = 1_000_000
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _calendar_date(value: Any) -> date:
    if not isinstance(value, str) or not DATE.fullmatch(value):
        raise ValueError("must be a date in the form YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError("must be a real calendar date (YYYY-MM-DD)") from None


def _four_places(value: Decimal) -> Decimal:
    if value != value.quantize(Decimal("0.0001")):
        raise ValueError("must have at most 4 decimal places")
    return value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


DueDate = Annotated[date, BeforeValidator(_calendar_date)]
UnitPrice = Annotated[
    Money, Field(ge=Decimal("0.01"), le=Decimal("1000000")), AfterValidator(_four_places)
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class LineItem(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(properties={"item": NON_BLANK, "amount": {"multipleOf": 0.0001}})
    )

    item: Annotated[StrictStr, Field(max_length=1000), AfterValidator(_non_blank)]
    quantity: WholeNumber = Field(ge=1, le=MAX_QUANTITY)
    amount: UnitPrice


LineItems = Annotated[list[LineItem], Field(min_length=1, max_length=200)]


class CreateInvoiceRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            properties={"contact_id": UUID_KEYWORDS, "quote_id": UUID_KEYWORDS}
        )
    )

    contact_id: UUIDText
    items: LineItems
    due_date: DueDate
    notes: StrictStr | None = Field(default=None, max_length=5000)
    quote_id: UUIDText | None = None


class UpdateInvoiceRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            not_null=("contact_id", "items", "due_date", "status"),
            properties={"contact_id": UUID_KEYWORDS},
            any_of=required_one_of("contact_id", "items", "due_date", "notes", "status"),
        )
    )

    contact_id: UUIDText | None = None
    items: LineItems | None = None
    due_date: DueDate | None = None
    notes: StrictStr | None = Field(default=None, max_length=5000)
    status: Literal["pending", "void", "refunded"] | None = None


class MarkPaidRequest(Strict):
    model_config = ConfigDict(json_schema_extra=document(properties={"payment_method": NON_BLANK}))

    payment_method: Annotated[StrictStr, Field(max_length=100), AfterValidator(_non_blank)]


class LineItemOut(BaseModel):
    item: str
    quantity: int
    amount: float


class Invoice(BaseModel):
    id: uuid.UUID
    invoice_number: str
    contact_id: uuid.UUID
    quote_id: uuid.UUID | None
    amount: float
    status: str
    issued_at: datetime
    due_date: date
    paid_at: datetime | None
    payment_method: str | None
    notes: str | None
    items: list[LineItemOut]
    payment_url: str | None
    payment_link_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


class InvoiceResponse(BaseModel):
    status: str
    invoice: Invoice


class UpdatedInvoiceResponse(InvoiceResponse):
    payment_link_cleared: bool


class InvoiceFilters(BaseModel):
    model_config = ConfigDict(
        extra="ignore", json_schema_extra=document(not_null=("status", "contact_id"))
    )

    status: Literal["pending", "void", "refunded", "paid"] | None = None
    contact_id: UUIDQuery | None = None


class InvoiceList(Page):
    invoices: list[Invoice]
