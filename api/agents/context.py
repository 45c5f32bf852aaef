"""Placeholders in an agent's prompt and first_message (CONTRACT 10 "Context"): `{{ name }}`,
spaces inside the braces optional, replaced by the call's value of that name.

Substitution only, in one pass over the template: a value is inserted as it is, so a value that
itself looks like a placeholder (a contact named `{{ contact.email }}`) stays that text and is
never rendered again; nothing is evaluated; an unknown name, or a name without a value, renders
as the empty string. Text in braces that is not a name (`{{ a b }}`, `{ x }`) stays as written.

Rendered text is bounded (CONTRACT 18a): each placeholder renders at most PLACEHOLDER_LIMIT
characters of its value, and a caller may cut the whole text at `limit` characters (a prompt at
PROMPT_LIMIT, a first_message at FIRST_MESSAGE_LIMIT).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# A name: letters, digits, `_`, `.` and `-` (`contact.custom.<key>`, a variable's key).
PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z0-9_.\-]*)[ \t]*\}\}")
PLACEHOLDER_LIMIT = 1_000
PROMPT_LIMIT = 40_000
FIRST_MESSAGE_LIMIT = 2_000


def render(template: str, values: Mapping[str, str], limit: int | None = None) -> str:
    """`template` with every placeholder replaced by the first PLACEHOLDER_LIMIT characters of
    its value in `values` ("" when absent), cut at `limit` characters when one is given."""
    pieces: list[str] = []
    length = position = 0
    for match in PLACEHOLDER.finditer(template):
        value = values.get(match.group(1), "")[:PLACEHOLDER_LIMIT]
        pieces += (template[position : match.start()], value)
        length += match.start() - position + len(value)
        position = match.end()
        if limit is not None and length >= limit:  # the rest would be cut anyway
            break
    else:
        pieces.append(template[position:])
    rendered = "".join(pieces)
    return rendered if limit is None else rendered[:limit]
