"""Request and response models of the agency operations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.schemas import FunctionsError
from api.types import (
    EMAIL_KEYWORDS,
    NON_BLANK_PATTERN,
    UUID_KEYWORDS,
    HeaderText,
    JSONObject,
    Money,
    UUIDText,
    WholeNumber,
    document,
)
from tenancy.tables.control import ROLES

EMAIL = {"type": "string", **EMAIL_KEYWORDS}
NAMED = {"type": "string", "pattern": NON_BLANK_PATTERN}


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CreateSubAccountRequest(Strict):
    # An owner's email, and a name or a CRM location (or both).
    model_config = ConfigDict(
        json_schema_extra=document(
            required=("email",),
            properties={"email": EMAIL},
            any_of=[
                {"required": ["name"], "properties": {"name": NAMED}},
                {"required": ["locationID"], "properties": {"locationID": NAMED}},
            ],
        )
    )

    email: StrictStr | None = None
    name: HeaderText | None = Field(default=None, max_length=200)
    locationID: HeaderText | None = Field(default=None, max_length=200)  # noqa: N815
    plan: StrictStr | None = Field(default=None, max_length=100)


class CreateSubAccountResponse(BaseModel):
    success: bool
    sub_account_id: uuid.UUID
    sub_account_slug: str
    invitation_token: str
    invitation_expires_at: datetime
    crm_connected: bool
    plan: str | None
    crm_error: str | None = None
    invitation_email_sent: bool


class AddSubAccountUserRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(
            required=("email", "role", "sub_account_id"),
            properties={
                "email": EMAIL,
                "role": {"enum": list(ROLES)},
                "sub_account_id": UUID_KEYWORDS,
            },
        )
    )

    email: StrictStr | None = None
    role: StrictStr | None = None
    sub_account_id: UUIDText | None = None
    first_name: HeaderText | None = Field(default=None, max_length=100)
    last_name: HeaderText | None = Field(default=None, max_length=100)
    phone: StrictStr | None = Field(default=None, max_length=32)


class AddSubAccountUserResponse(BaseModel):
    success: bool
    message: str
    invitation_id: uuid.UUID
    expires_at: datetime


class AcceptInvitationRequest(Strict):
    token: StrictStr = Field(max_length=64)
    first_name: HeaderText | None = Field(default=None, max_length=100)
    last_name: HeaderText | None = Field(default=None, max_length=100)


class AcceptInvitationResponse(BaseModel):
    success: bool
    user_id: uuid.UUID
    sub_account_id: uuid.UUID
    role: str


class Rebilling(Strict):
    email_per_message: Money | None = Field(default=None, ge=0, le=1000)
    sms_per_message: Money | None = Field(default=None, ge=0, le=1000)
    call_per_minute: Money | None = Field(default=None, ge=0, le=1000)
    phone_number_monthly: Money | None = Field(default=None, ge=0, le=100000)


class CreatePlanRequest(Strict):
    slug: StrictStr = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    name: HeaderText = Field(min_length=1, max_length=200)
    max_users: WholeNumber | None = Field(default=None, ge=1, le=100000)
    features: JSONObject | None = None
    rebilling: Rebilling | None = None
    # Calls of a sub-account on the plan in progress at once; more wait queued (CONTRACT 6, 9).
    max_concurrent_calls: WholeNumber = Field(default=10, ge=1, le=1000)


class Plan(BaseModel):
    id: uuid.UUID
    slug: str
    name: str
    max_users: int | None
    max_concurrent_calls: int
    features: dict[str, Any]
    rebilling: dict[str, float]
    created_at: datetime


class PlanResponse(BaseModel):
    success: bool
    plan: Plan


class ApiKeyResponse(BaseModel):
    success: bool
    key_id: uuid.UUID
    api_key: str


class SubAccount(BaseModel):
    id: uuid.UUID
    name: str
    slug: str
    plan: str | None
    status: str
    crm_connected: bool
    crm_location_id: str | None
    timezone: str
    created_at: datetime


class SubAccountList(BaseModel):
    success: bool
    sub_accounts: list[SubAccount]
    total: int
    limit: int
    offset: int
    has_more: bool


class WalletCreditRequest(Strict):
    model_config = ConfigDict(
        json_schema_extra=document(properties={"amount": {"multipleOf": 0.01}})
    )

    amount: Money = Field(gt=0, le=1_000_000)
    description: StrictStr | None = Field(default=None, max_length=500)


class WalletCreditResponse(BaseModel):
    success: bool
    balance: float


class InvitationEmailFailed(FunctionsError):
    invitation_token: str


__all__ = ["StrictBool"]
