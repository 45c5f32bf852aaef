"""A campaign email for one recipient: tracked links, an open pixel and an unsubscribe link."""

from __future__ import annotations

import html
import re
import uuid
from dataclasses import dataclass

from api.tracking.tokens import sign
from integrations.email import has_control_characters
from tenancy.settings import get_settings

HREF = re.compile(r"""(href\s*=\s*)(["'])(https?://[^"'\s<>]+)\2""", re.IGNORECASE)
TAG = re.compile(r"<[^>]+>")
BLANK_LINES = re.compile(r"\n\s*\n\s*\n+")
BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)


def message_id(campaign_id: uuid.UUID, contact_id: uuid.UUID) -> str:
    """Stable per recipient, so a provider can drop a repeat sent after a crash."""
    return f"<{campaign_id}.{contact_id}@switchboard>"


def tracking_url(kind: str, token: str) -> str:
    return f"{get_settings().public_url.rstrip('/')}/track/{kind}/{token}"


@dataclass(frozen=True)
class RenderedEmail:
    html: str
    text: str
    unsubscribe_url: str


def tracked_links(content: str) -> list[str]:
    """The http(s) links of an email body as a recipient's client will follow them."""
    return [html.unescape(match.group(3)) for match in HREF.finditer(content)]


def check_links(content: str) -> str:
    """Refuse a body with a link that could not be sent in a redirect (an entity such as
    `&#13;` decodes to a control character): found when the campaign is written, not when a
    recipient clicks."""
    for url in tracked_links(content):
        if has_control_characters(url):
            raise ValueError("links must not contain control characters")
    return content


def render(content: str, sub_account_id: uuid.UUID, recipient_id: uuid.UUID) -> RenderedEmail:
    def tracked(match: re.Match[str]) -> str:
        url = html.unescape(match.group(3))
        token = sign("click", sub_account_id, recipient_id, url)
        return f"{match.group(1)}{match.group(2)}{tracking_url('click', token)}{match.group(2)}"

    unsubscribe = tracking_url("unsubscribe", sign("unsubscribe", sub_account_id, recipient_id))
    pixel = tracking_url("open", sign("open", sub_account_id, recipient_id))
    footer = (f'<p style="font-size:12px;color:#666"><a href="{unsubscribe}">Unsubscribe</a></p>'
              f'<img src="{pixel}" width="1" height="1" alt="" style="display:none">')
    body = HREF.sub(tracked, content)
    found = BODY_END.search(body)
    body = body[:found.start()] + footer + body[found.start():] if found else body + footer
    return RenderedEmail(body, f"{plain_text(content)}\n\nUnsubscribe: {unsubscribe}\n",
                         unsubscribe)


def plain_text(content: str) -> str:
    """A readable text alternative of an HTML body."""
    text = re.sub(r"<\s*(br|/p|/div|/h\d|/li)\s*/?>", "\n", content, flags=re.IGNORECASE)
    text = html.unescape(TAG.sub("", text))
    return BLANK_LINES.sub("\n\n", text).strip()
