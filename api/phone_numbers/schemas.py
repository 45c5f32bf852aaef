"""Request and response models of the phone number operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.types import E164_PATTERN, UUID_KEYWORDS, UUIDText, document


class PurchaseRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    area_code: Annotated[StrictStr, Field(pattern=r"^[2-9][0-9]{2}$")] | None = None


class ImportRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=document(
            properties={
                "phone_number": {
                    "pattern": E164_PATTERN,
                    "description": "E.164, a number the phonenumbers library holds valid",
                }
            }
        ),
    )

    phone_number: Annotated[StrictStr, Field(max_length=32)]


class AssignRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore", json_schema_extra=document(properties={"agent_id": UUID_KEYWORDS})
    )

    agent_id: UUIDText


class PhoneNumber(BaseModel):
    id: uuid.UUID
    phone_number: str
    purchased: bool
    agent_id: uuid.UUID | None
    agent_name: str | None
    is_active: bool
    purchased_at: datetime | None
    next_billing_date: datetime | None


class PhoneNumberResponse(BaseModel):
    status: str
    phone_number: PhoneNumber


class PhoneNumberList(BaseModel):
    status: str
    phone_number_count: int
    phone_numbers: list[PhoneNumber]


class Assigned(BaseModel):
    status: str
    assigned: bool
    phone_number_id: uuid.UUID
    phone_number: str
    agent_id: uuid.UUID
    already_assigned: bool


class Unassigned(BaseModel):
    status: str
    unassigned: bool
    already_unassigned: bool
    phone_number_id: uuid.UUID
    phone_number: str
    # The agent the number was taken from; null when it had none.
    agent_id: uuid.UUID | None
    dispatch_rule_deleted: bool


class Released(BaseModel):
    status: str
    released: bool
    phone_number_id: uuid.UUID
    phone_number: str
    was_purchased: bool
    dispatch_rule_deleted: bool
