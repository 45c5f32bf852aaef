"""normalise_email's shortcut for plain addresses agrees with email-validator on every input."""

from __future__ import annotations

import pytest
from email_validator import EmailNotValidError, validate_email
from hypothesis import example, given, settings
from hypothesis import strategies as st

from api.types import _plain_email, normalise_email


def library(value: str) -> str | None:
    try:
        return validate_email(value.strip(" "), check_deliverability=False).normalized.lower()
    except EmailNotValidError:
        return None


# Mostly near-plain addresses (so both branches are exercised), sometimes odd characters.
LABEL = st.one_of(
    st.text(alphabet="abcXYZ019-", min_size=1, max_size=8),
    st.text(alphabet="abcXYZ019-_é", min_size=0, max_size=70),
)
LOCAL = st.one_of(
    st.text(alphabet="abcXYZ019._+-", min_size=1, max_size=12),
    st.text(alphabet="abcXYZ019._+-!~é ", min_size=0, max_size=70),
)
DOMAIN = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
TLD = st.sampled_from(
    [
        "com",
        "Com",
        "io",
        "x",
        "c0m",
        "123",
        "local",
        "test",
        "onion",
        "invalid",
        "arpa",
        "localhost",
        "xn--p1ai",
        "ab--c",
        "é",
    ]
)


@settings(max_examples=3000, deadline=None)
@given(local=LOCAL, domain=DOMAIN, tld=TLD)
@example(local="Person.One", domain="Example", tld="COM")
@example(local="a" * 64, domain="b" * 63, tld="com")
@example(local="a" * 65, domain="b", tld="com")
@example(local="a", domain="b" * 64, tld="com")
@example(local="a", domain="ab--cd", tld="com")
@example(local="a", domain="-b", tld="com")
@example(local="a", domain="b-", tld="com")
@example(local=".a", domain="b", tld="com")
@example(local="a..b", domain="b", tld="com")
@example(local="a", domain="my", tld="local")
@example(local="a", domain="b.c.d.e.f.g.h.i", tld="com")
def test_shortcut_agrees_with_the_library(local: str, domain: str, tld: str) -> None:
    address = f"{local}@{domain}.{tld}"
    assert normalise_email(address) == library(address)
    plain = _plain_email(address)
    if plain is not None:  # the shortcut only ever accepts what the library accepts, as it would
        assert plain == library(address)


@given(st.text(max_size=80))
@settings(max_examples=1000, deadline=None)
def test_any_text_is_judged_as_the_library_judges_it(value: str) -> None:
    assert normalise_email(value) == library(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  Person.One+tag@Example.COM ", "person.one+tag@example.com"),
        ("a@b.co", "a@b.co"),
        (f"{'a' * 64}@{'b' * 63}.{'c' * 63}.{'d' * 63}.com", None),  # over 254 characters
        ("a@localhost", None),
        ("a@my.test", None),
        ("a@xn--bcher-kva.com", "a@bücher.com"),  # Punycode: left to the library, which decodes it
    ],
)
def test_examples(value: str, expected: str | None) -> None:
    assert normalise_email(value) == expected
    assert library(value) == expected
