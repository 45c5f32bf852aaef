"""Campaign email as bytes, fast: the headers that never change are folded once per campaign.

Python's `email` package spends milliseconds per message on header objects; a campaign sends the
same From and Subject to everyone, so those are encoded once (by the stdlib's SMTP policy: non-ASCII
text as RFC 2047 words) and each recipient's message is assembled from them, with both bodies
base64-encoded. Every folded header is checked as written (integrations.email.fold_header): text
that is or decodes to a line break never reaches the message.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass
from email.utils import formatdate

from integrations.email import fold_header

PLAIN_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~@-]{3,320}$")


@dataclass(frozen=True)
class CampaignHeaders:
    """The folded From and Subject lines and the campaign marker, shared by every message."""

    shared: bytes

    @classmethod
    def of(cls, from_address: str, subject: str, campaign_id: uuid.UUID) -> CampaignHeaders:
        return cls(
            fold_header("From", from_address)
            + fold_header("Subject", subject)
            + f"X-Switchboard-Campaign: {campaign_id}\r\n".encode()
            + b"MIME-Version: 1.0\r\n"
        )


def _to(address: str) -> bytes:
    # "=?" is atext, so an address may look like an encoded word: folded and checked as decoded.
    if PLAIN_ADDRESS.fullmatch(address) and "=?" not in address:
        return f"To: {address}\r\n".encode()
    return fold_header("To", address)


def _part(content_type: str, body: str) -> bytes:
    return (
        f'Content-Type: {content_type}; charset="utf-8"\r\n'
        "Content-Transfer-Encoding: base64\r\n\r\n"
    ).encode() + base64.encodebytes(body.encode()).replace(b"\n", b"\r\n")


def message_bytes(
    headers: CampaignHeaders, to: str, message_id: str, text: str, html: str, unsubscribe_url: str
) -> bytes:
    """One recipient's multipart/alternative message, ready for SMTP DATA."""
    boundary = f"sb-{uuid.uuid4().hex}".encode()
    return b"".join(
        (
            headers.shared,
            _to(to),
            f"Date: {formatdate(localtime=False, usegmt=True)}\r\n".encode(),
            f"Message-ID: {message_id}\r\n".encode(),
            f"List-Unsubscribe: <{unsubscribe_url}>\r\n".encode(),
            b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n",
            b'Content-Type: multipart/alternative; boundary="' + boundary + b'"\r\n\r\n',
            b"--" + boundary + b"\r\n",
            _part("text/plain", text),
            b"--" + boundary + b"\r\n",
            _part("text/html", html),
            b"--" + boundary + b"--\r\n",
        )
    )
