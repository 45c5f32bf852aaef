"""Response models: always documented, checked at run time only when asked to.

Routes declare what they answer with `@validate_response(Model, status)`, as with quart-schema,
and the OpenAPI document is built from those declarations. quart-schema would also load every
response into its model and dump it again before encoding it, which costs more per request than
the query behind a simple read. Here the handlers' plain dicts go straight to the JSON encoder,
and `SWITCHBOARD_VALIDATE_RESPONSES` (on in the test suite, which exercises every route, and
in the fuzzing run against a live server) checks each answer against its declared model and
that the model would have produced exactly the body that is sent.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from quart import Response, current_app, request
from quart_schema.conversion import camel_to_snake  # type: ignore[attr-defined]
from quart_schema.validation import ResponseSchemaValidationError

from api.framework import declare_response, declared_response, use_request_model_loader

log = logging.getLogger("switchboard.api")

F = TypeVar("F", bound=Callable[..., Any])


def validate_response(model_class: type[BaseModel], status_code: int = 200) -> Callable[[F], F]:
    """Declare that the route answers `status_code` with a body of `model_class`."""

    def decorator(func: F) -> F:
        declare_response(func, model_class, status_code)
        return func

    return decorator


def validate_errors(model_class: type[BaseModel], *status_codes: int) -> Callable[[F], F]:
    """Declare that the route answers each of `status_codes` with an error body of
    `model_class` (one line for a route's refusals instead of one decorator each)."""

    def decorator(func: F) -> F:
        for status_code in status_codes:
            declare_response(func, model_class, status_code)
        return func

    return decorator


@functools.cache
def _adapter(model_class: Any) -> TypeAdapter[Any]:
    return TypeAdapter(model_class)


def load_request_model(
    data: Any,
    model_class: Any,
    exception_class: type[Exception],
    *,
    decamelize: bool = False,
    preference: str | None = None,
) -> Any:
    """quart-schema's `model_load` for pydantic models, with one TypeAdapter per model class:
    quart-schema builds a new one for every request it validates, which costs more than the
    validation itself."""
    if decamelize:
        data = camel_to_snake(data)
    try:
        return _adapter(model_class).validate_python(data)
    except (TypeError, ValueError) as error:  # pydantic's ValidationError is a ValueError
        raise exception_class(error) from None


def install_request_model_loading() -> None:
    """Make quart-schema's request and query string validation use load_request_model (every
    model here is pydantic: the app sets conversion_preference="pydantic"); its header
    validation does not load models this way."""
    use_request_model_loader(load_request_model)


def _canonical(value: Any) -> Any:
    return json.loads(current_app.json.dumps(value))


def check_response(value: Any, status: int) -> None:
    """Raise ResponseSchemaValidationError when the body does not match the route's model for
    this status (a status the route does not declare is not checked)."""
    if isinstance(value, Response) or request.url_rule is None:
        return
    view = current_app.view_functions.get(request.url_rule.endpoint)
    declared = declared_response(view, status)
    if declared is None:
        return
    adapter = _adapter(declared)
    try:
        model = adapter.validate_python(value)
    except ValidationError as error:
        log.error(
            "response of %s %s does not match %s: %s",
            request.method,
            request.url_rule,
            declared.__name__,
            error,
        )
        raise ResponseSchemaValidationError(error) from None
    sent, modelled = _canonical(value), _canonical(adapter.dump_python(model, exclude_unset=True))
    if sent != modelled:
        log.error(
            "response of %s %s differs from what %s gives at %s",
            request.method,
            request.url_rule,
            declared.__name__,
            ", ".join(_differences(sent, modelled)),
        )
        raise ResponseSchemaValidationError(
            ValueError(f"the body differs from its {declared.__name__} model")
        )


def _differences(sent: Any, modelled: Any, path: str = "body") -> list[str]:
    if isinstance(sent, dict) and isinstance(modelled, dict):
        return [
            found
            for key in sorted(set(sent) | set(modelled))
            for found in _differences(
                sent.get(key, "<absent>"), modelled.get(key, "<absent>"), f"{path}.{key}"
            )
        ]
    if isinstance(sent, list) and isinstance(modelled, list) and len(sent) == len(modelled):
        return [
            found
            for index, (a, b) in enumerate(zip(sent, modelled, strict=True))
            for found in _differences(a, b, f"{path}[{index}]")
        ]
    return [] if sent == modelled else [f"{path} (sent {sent!r:.80}, model {modelled!r:.80})"]
