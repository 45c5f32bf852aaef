"""Phone-number work of the worker: provider provisioning, and monthly renewals.

Provisioning jobs answer a waiting request: they return `{...}` on success or `{"error": ...}`
with the refusal (a provider failure is 502 provider_error), never raise. Renewals of purchased
numbers run on the durable scheduler (`phone_number_renewal` work, one row per number).
Registered in cli/wiring.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from api.phone_numbers import service as numbers
from integrations.telephony import Providers, TelephonyError
from tenancy.due import DueWork
from tenancy.errors import APIError
from tenancy.scope import TenantScope

log = logging.getLogger("switchboard.telephony")

Work = Callable[[Providers], Awaitable[dict[str, Any]]]


async def _provision(ctx: dict[str, Any], work: Work) -> dict[str, Any]:
    providers = Providers(ctx["settings"].telephony)
    try:
        return await work(providers)
    except APIError as exc:
        return _refusal(exc)
    except TelephonyError as exc:
        return _refusal(numbers.provider_failed(exc))
    finally:
        await providers.aclose()


def _scope(ctx: dict[str, Any], sub_account_id: str) -> TenantScope:
    return TenantScope.of_sub_account(ctx["db"], uuid.UUID(sub_account_id))


def _refusal(exc: APIError) -> dict[str, Any]:
    return {"error": {"status": exc.status, "code": exc.code, "message": exc.message}}


async def purchase_phone_number(
    ctx: dict[str, Any], sub_account_id: str, area_code: str | None, deadline: float
) -> dict[str, Any]:
    return await _provision(
        ctx,
        lambda providers: numbers.provision_purchase(
            _scope(ctx, sub_account_id), providers, area_code, deadline
        ),
    )


async def import_phone_number(
    ctx: dict[str, Any], sub_account_id: str, phone_number: str, deadline: float
) -> dict[str, Any]:
    return await _provision(
        ctx,
        lambda providers: numbers.provision_import(
            _scope(ctx, sub_account_id), providers, phone_number, deadline
        ),
    )


async def assign_phone_number(
    ctx: dict[str, Any], sub_account_id: str, number_id: str, agent_id: str, deadline: float
) -> dict[str, Any]:
    return await _provision(
        ctx,
        lambda providers: numbers.provision_assignment(
            _scope(ctx, sub_account_id),
            providers,
            uuid.UUID(number_id),
            uuid.UUID(agent_id),
            deadline,
        ),
    )


async def unassign_phone_number(
    ctx: dict[str, Any], sub_account_id: str, number_id: str, deadline: float
) -> dict[str, Any]:
    return await _provision(
        ctx,
        lambda providers: numbers.provision_unassignment(
            _scope(ctx, sub_account_id), providers, uuid.UUID(number_id), deadline
        ),
    )


async def release_phone_number(
    ctx: dict[str, Any], sub_account_id: str, number_id: str, deadline: float
) -> dict[str, Any]:
    return await _provision(
        ctx,
        lambda providers: numbers.provision_release(
            _scope(ctx, sub_account_id), providers, uuid.UUID(number_id), deadline
        ),
    )


async def renew_phone_number(ctx: dict[str, Any], work: DueWork) -> datetime | None:
    return await numbers.renew(work.scope(ctx["db"]), work.ref_id)
