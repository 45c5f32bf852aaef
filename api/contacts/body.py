"""`validate_optional_body`: like quart-schema's `validate_request`, for bodies that may be absent.

An empty body (or a JSON `null`) is read as `{}`, so the operation can answer with its own code
(`contacts_email_or_phone_required`, `nothing_to_update`, `tags_required`) instead of a generic
"the body must be a JSON object".
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from quart import request
from quart_schema import RequestSchemaValidationError

from api.framework import declare_json_body
from api.validation import load_request_model

OPTIONAL_BODY_ATTRIBUTE = "_switchboard_optional_body"


def validate_optional_body(model_class: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        declare_json_body(func, model_class)
        setattr(func, OPTIONAL_BODY_ATTRIBUTE, True)

        @wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            model: Any = load_request_model(
                await _body_or_empty(), model_class, RequestSchemaValidationError
            )
            return await func(*args, data=model, **kwargs)

        return wrapper

    return decorator


async def _body_or_empty() -> Any:
    raw = await request.get_data(as_text=False)
    if not raw.strip():
        return {}
    data = await request.get_json()
    # JSON `null` counts as no body; a body that is not JSON at all stays None (and is refused).
    return {} if data is None and request.is_json else data
