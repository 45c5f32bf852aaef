"""The cleaning of text and JSON that PostgreSQL cannot store as it is (CONTRACT 18a)."""

from __future__ import annotations

from decimal import Decimal

from tenancy.storable import storable, storable_text


def test_nul_is_removed_from_text() -> None:
    assert storable_text("a\x00b\x00") == "ab"


def test_a_lone_surrogate_is_u_fffd_and_a_split_pair_is_joined() -> None:
    assert storable_text("\ud800x\udc00") == "\ufffdx\ufffd"
    assert storable_text("ok \ud83d\ude00 \ud83d") == "ok \U0001f600 \ufffd"


def test_clean_text_is_unchanged() -> None:
    for text in ("", "plain", "caf\u00e9 \U0001f600", "\u2028 tab\t"):
        assert storable_text(text) == text


def test_a_non_finite_number_is_null_at_any_depth_and_keys_are_cleaned() -> None:
    value = {
        "n": float("nan"),
        "i": [float("inf"), -float("inf"), 1.5, 2, True, None],
        "k\x00ey": {"\ud800": Decimal("NaN"), "d": Decimal("1.10")},
        "t": ("a\x00",),
    }
    assert storable(value) == {
        "n": None,
        "i": [None, None, 1.5, 2, True, None],
        "key": {"\ufffd": None, "d": Decimal("1.10")},
        "t": ["a"],
    }
