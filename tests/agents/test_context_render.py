"""The placeholder renderer (CONTRACT 10 "Context", 10a): substitution only, in one pass."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.agents.context import render
from api.calls.context import context_values, custom_field_text

VALUES = {
    "contact.first_name": "Ada",
    "contact.email": "ada@example.com",
    "now": "NOW",
    "today": "2026-11-27",
    "order_id": "A-17",
}


@pytest.mark.parametrize(
    "template",
    [
        "Hi {{contact.first_name}}",
        "Hi {{ contact.first_name }}",
        "Hi {{  contact.first_name\t}}",
        "Hi {{contact.first_name }}",
    ],
)
def test_spaces_inside_the_braces_are_optional(template):
    assert render(template, VALUES) == "Hi Ada"


def test_every_placeholder_is_replaced_and_the_rest_kept():
    template = "Order {{ order_id }} for {{ contact.first_name }} ({{contact.email}}), {{ today }}."
    assert render(template, VALUES) == "Order A-17 for Ada (ada@example.com), 2026-11-27."


def test_unknown_name_renders_as_the_empty_string():
    assert render("Hi {{ contact.nickname }}!", VALUES) == "Hi !"


def test_empty_name_renders_as_the_empty_string():
    assert render("a{{}}b{{ }}c", VALUES) == "abc"


def test_name_with_an_empty_value_renders_as_the_empty_string():
    assert render("[{{ contact.last_name }}]", {"contact.last_name": ""}) == "[]"


def test_a_contact_named_like_a_placeholder_is_inserted_literally():
    values = {**VALUES, "contact.name": "{{ contact.email }}"}
    assert render("Hello {{ contact.name }}", values) == "Hello {{ contact.email }}"


def test_a_custom_field_holding_a_placeholder_is_never_rendered_twice():
    values = {**VALUES, "contact.custom.note": "{{ now }} and {{contact.email}}"}
    assert (
        render("Note: {{ contact.custom.note }}", values) == "Note: {{ now }} and {{contact.email}}"
    )


def test_a_value_that_renders_itself_does_not_loop():
    assert render("{{ a }}", {"a": "{{ a }}"}) == "{{ a }}"


@pytest.mark.parametrize(
    "text",
    [
        "{ contact.first_name }",
        "{contact.first_name}}",
        "{{contact.first_name}",
        "{{ contact first_name }}",
        "{{ contact.first_name | upper }}",
        "}}{{",
        "{{{{}}",
    ],
)
def test_braces_that_make_no_placeholder_stay_as_written(text):
    assert render(text, VALUES) == text.replace("{{}}", "")


def test_nested_braces_replace_the_inner_placeholder_only():
    assert render("{{{ contact.first_name }}}", VALUES) == "{Ada}"
    assert render("{{ {{ contact.first_name }} }}", VALUES) == "{{ Ada }}"


def test_nothing_is_evaluated():
    template = "{{ __import__('os').system('x') }} {{ 1 + 1 }} {{ now() }} ${now} %(now)s"
    assert render(template, VALUES) == template


def test_backslashes_and_group_references_in_values_are_inserted_as_they_are():
    assert render("{{ a }}", {"a": r"C:\new \1 \g<0>"}) == r"C:\new \1 \g<0>"


def test_unicode_in_values_and_around_placeholders_is_kept():
    values = {"contact.first_name": "Zoë 李 👋", "contact.custom.stadt": "Zürich"}
    assert (
        render("¡Hola {{ contact.first_name }} — {{contact.custom.stadt}}! ✓", values)
        == "¡Hola Zoë 李 👋 — Zürich! ✓"
    )


def test_unicode_names_are_no_placeholders():
    assert render("{{ contact.prénom }}", VALUES) == "{{ contact.prénom }}"


def test_a_template_without_placeholders_is_unchanged():
    assert render("Be brief and kind.", VALUES) == "Be brief and kind."


# --- bounds (CONTRACT 18a) ------------------------------------------------------------------------


def test_a_placeholder_renders_at_most_1000_characters_of_its_value():
    assert render("<{{ a }}>", {"a": "x" * 5000}) == f"<{'x' * 1000}>"


def test_a_value_of_1000_characters_renders_whole():
    assert render("{{ a }}", {"a": "x" * 1000}) == "x" * 1000


def test_a_limit_cuts_the_rendered_text_there():
    assert render("ab{{ a }}cd{{ a }}", {"a": "x" * 1000}, 1003) == "ab" + "x" * 1000 + "c"
    assert render("abc", {}, 2) == "ab"


def test_text_within_the_limit_is_not_cut():
    assert render("ab{{ a }}cd", {"a": "xy"}, 6) == "abxycd"


# --- custom field values as text ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("hello", "hello"),
        (42, "42"),
        (3.5, "3.5"),
        (True, "true"),
        (False, "false"),
        ("2026-11-27", "2026-11-27"),
        (["red", "blue"], "red, blue"),
        ([], ""),
        (None, ""),
    ],
)
def test_custom_field_values_as_text(value, text):
    assert custom_field_text(value) == text


# --- now and today --------------------------------------------------------------------------------


def _row(timezone: str, **extra):
    return {
        "direction": "outbound",
        "from_number": "+14155550123",
        "to_number": "+14155552671",
        "variables": {},
        "first_name": None,
        "last_name": None,
        "name": None,
        "email": None,
        "phone": None,
        "custom_field_values": {},
        "timezone": timezone,
        "sub_account_name": "Shop",
        **extra,
    }


def test_now_has_the_agents_utc_offset_and_today_its_date():
    instant = datetime(2026, 11, 27, 23, 30, 5, 123000, tzinfo=UTC)
    values = context_values(_row("Asia/Tokyo"), instant)
    assert values["now"] == "2026-11-28T08:30:05+09:00"
    assert values["today"] == "2026-11-28"


def test_now_in_utc_says_its_offset():
    values = context_values(_row("UTC"), datetime(2026, 6, 1, 12, 0, tzinfo=UTC))
    assert (values["now"], values["today"]) == ("2026-06-01T12:00:00+00:00", "2026-06-01")


def test_now_follows_daylight_saving_time():
    summer = context_values(_row("Europe/Berlin"), datetime(2026, 7, 1, 10, 0, tzinfo=UTC))
    winter = context_values(_row("Europe/Berlin"), datetime(2026, 12, 1, 10, 0, tzinfo=UTC))
    assert summer["now"].endswith("+02:00") and winter["now"].endswith("+01:00")


def test_a_variable_named_like_a_built_in_name_does_not_replace_it():
    values = context_values(
        _row("UTC", variables={"today": "someday", "plan": "pro"}), datetime(2026, 6, 1, tzinfo=UTC)
    )
    assert values["today"] == "2026-06-01" and values["plan"] == "pro"
