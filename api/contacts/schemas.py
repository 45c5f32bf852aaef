"""Request and response models of the contact operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.types import (
    E164_PATTERN,
    EMAIL_KEYWORDS,
    NON_BLANK,
    UUID_KEYWORDS,
    Repeated,
    UUIDText,
    document,
    required_one_of,
)

MAX_NAME = 200
MAX_ADDRESS = 1000
MAX_SOURCE = 100


class ContactFields(BaseModel):
    """The fields create and update share. Which ones were sent is `model_fields_set`."""

    model_config = ConfigDict(extra="ignore")

    name: StrictStr | None = Field(default=None, max_length=MAX_NAME)
    first_name: StrictStr | None = Field(default=None, max_length=MAX_NAME)
    last_name: StrictStr | None = Field(default=None, max_length=MAX_NAME)
    email: StrictStr | None = Field(default=None, max_length=320)
    phone: StrictStr | None = Field(default=None, max_length=64)
    address: StrictStr | None = Field(default=None, max_length=MAX_ADDRESS)
    source: StrictStr | None = Field(default=None, max_length=MAX_SOURCE)
    custom_field_values: dict[str, Any] | None = Field(default=None, max_length=200)
    company_id: UUIDText | None = None
    assigned_user_id: UUIDText | None = None
    status: StrictStr | None = None


# What the service checks beyond the types (the OpenAPI document states it).
STATUS = {**NON_BLANK, "maxLength": MAX_SOURCE}
REFERENCES = {"company_id": UUID_KEYWORDS, "assigned_user_id": UUID_KEYWORDS}
USABLE_EMAIL = {"type": "string", **EMAIL_KEYWORDS}
E164 = {
    "pattern": E164_PATTERN,
    "description": "E.164, and a number the phonenumbers library holds valid",
}


class CreateContactRequest(ContactFields):
    """Tags are not accepted on create (ignored if sent)."""

    model_config = ConfigDict(
        json_schema_extra=document(
            not_null=("custom_field_values", "status"),
            properties={**REFERENCES, "status": STATUS},
            any_of=[
                {"required": ["email"], "properties": {"email": USABLE_EMAIL}},
                {"required": ["phone"], "properties": {"phone": {"type": "string", **E164}}},
            ],
        )
    )


class UpdateContactRequest(ContactFields):
    tags: list[StrictStr] | None = Field(default=None, max_length=100)

    model_config = ConfigDict(
        json_schema_extra=document(
            not_null=("custom_field_values", "status", "tags", "source"),
            properties={
                **REFERENCES,
                "status": STATUS,
                "source": NON_BLANK,
                "email": EMAIL_KEYWORDS,
                "phone": E164,
                "tags": {"items": {"type": "string", "maxLength": 100}},
            },
            any_of=required_one_of(
                "name",
                "first_name",
                "last_name",
                "email",
                "phone",
                "address",
                "tags",
                "source",
                "custom_field_values",
                "company_id",
                "assigned_user_id",
                "status",
            ),
            # A contact keeps an email or a phone: clearing both at once is 400.
            refuse={
                "required": ["email", "phone"],
                "properties": {"email": {"type": "null"}, "phone": {"type": "null"}},
            },
        )
    )


class Contact(BaseModel):
    id: uuid.UUID
    name: str | None
    first_name: str | None
    last_name: str | None
    email: str | None
    phone: str | None
    address: str | None
    tags: list[str]
    lead_source: str
    custom_field_values: dict[str, Any]
    company_id: uuid.UUID | None
    assigned_user_id: uuid.UUID | None
    status: str | None
    created_at: datetime
    updated_at: datetime


class ContactFilters(BaseModel):
    """GET /contacts search (CONTRACT 7, 9): every filter given must hold (AND)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            not_null=("q", "email", "phone", "tag"),
            properties={
                "email": EMAIL_KEYWORDS,
                "phone": E164,
                "tag": {"items": {"type": "string", "minLength": 1, "maxLength": 100}},
            },
        ),
    )

    q: StrictStr | None = Field(
        default=None,
        min_length=2,
        max_length=100,
        description=(
            "Case-insensitive text within the name or the email, or, when it is written as a phone "
            "number (digits with + - . ( ) and spaces), its digits within the phone's digits."
        ),
    )
    email: StrictStr | None = Field(
        default=None, max_length=320, description="Exactly this address, in any case."
    )
    phone: StrictStr | None = Field(
        default=None, max_length=64, description="Exactly this E.164 number."
    )
    tag: Annotated[
        list[StrictStr] | None,
        Repeated,
        Field(max_length=100, description="Repeatable: contacts carrying every tag given."),
    ] = None


class ContactResponse(BaseModel):
    status: str
    contact: Contact


class ContactList(BaseModel):
    status: str
    total: int
    limit: int
    offset: int
    has_more: bool
    contacts: list[Contact]


class ContactCreated(BaseModel):
    status: str
    created: bool
    contact_id: uuid.UUID


class ContactUpdated(BaseModel):
    status: str
    updated: bool
    contact_id: uuid.UUID


class ContactDeleted(BaseModel):
    status: str
    deleted: bool
    contact_id: uuid.UUID
