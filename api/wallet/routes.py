"""GET /webhooks/inbound/wallet: the sub-account's balance and its ledger, newest first."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from quart import Blueprint, request
from quart_schema import tag

from api.auth import SUB_ACCOUNT, requires, tenant_scope
from api.schemas import InboundError as ErrorResponse
from api.types import page_body, pagination
from api.validation import validate_response
from api.wallet import service

blueprint = Blueprint("wallet", __name__, url_prefix="/webhooks/inbound")


class Balance(BaseModel):
    balance: float
    currency: str


class Transaction(BaseModel):
    id: uuid.UUID
    amount: float
    balance_after: float
    kind: str
    status: str
    description: str | None
    reference_type: str | None
    reference_id: uuid.UUID | None
    created_at: datetime


class WalletResponse(BaseModel):
    status: str
    wallet: Balance
    transactions: list[Transaction]
    total: int
    limit: int
    offset: int
    has_more: bool


@blueprint.get("/wallet")
@tag(["Wallet"])
@requires(SUB_ACCOUNT)
@validate_response(WalletResponse, 200)
@validate_response(ErrorResponse, 400)
async def get_wallet() -> dict[str, Any]:
    """The wallet balance and its transactions (credits, debits, declined debits), newest first."""
    limit, offset = pagination(request.args)
    wallet, transactions, total = await service.wallet_with_transactions(
        tenant_scope(), limit, offset
    )
    return {**page_body("transactions", transactions, total, limit, offset), "wallet": wallet}
