"""Placeholders in an agent's prompt and first_message (CONTRACT 10 "Context"): `{{ name }}`,
spaces inside the braces optional, replaced by the call's value of that name.

Substitution only, in one pass over the template: a value is inserted as it is, so a value that
itself looks like a placeholder (a contact named `{{ contact.email }}`) stays that text and is
never rendered again; nothing is evaluated; an unknown name, or a name without a value, renders
as the empty string. Text in braces that is not a name (`{{ a b }}`, `{ x }`) stays as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# A name: letters, digits, `_`, `.` and `-` (`contact.custom.<key>`, a variable's key).
PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z0-9_.\-]*)[ \t]*\}\}")


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with every placeholder replaced by its value in `values` ("" when absent)."""
    return PLACEHOLDER.sub(lambda match: values.get(match.group(1), ""), template)
