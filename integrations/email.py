"""Outbound email over SMTP (aiosmtplib), through an organisation's own server or the platform's."""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import make_msgid

import aiosmtplib

log = logging.getLogger("switchboard.email")


@dataclass(frozen=True)
class SMTPConfig:
    host: str
    port: int
    from_address: str
    username: str | None = None
    password: str | None = None
    starttls: bool = False
    timeout: float = 10.0

    def __repr__(self) -> str:  # never print the password
        return f"SMTPConfig(host={self.host!r}, port={self.port}, from={self.from_address!r})"


class EmailDeliveryError(Exception):
    pass


class UnsafeHeader(EmailDeliveryError, ValueError):
    """Header text with a control character: the message is never built, so never sent.
    Client text is refused at the API before this (400); here it guards every other path."""


# Line and paragraph separators split lines for some readers although they are not category Cc.
LINE_SEPARATORS = frozenset("\u2028\u2029\x85")


def has_control_characters(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" or char in LINE_SEPARATORS for char in text)


def one_line(text: str) -> str:
    """Text from elsewhere (a CRM's location name, a stored name) made fit for a header."""
    return "".join(" " if unicodedata.category(char) == "Cc" or char in LINE_SEPARATORS
                   else char for char in text)


def check_header(name: str, value: str) -> str:
    """`value`, when it is safe to write as one header line; UnsafeHeader otherwise."""
    if has_control_characters(value):
        raise UnsafeHeader(f"{name} must not contain control characters")
    return value


def build_message(config: SMTPConfig, to: str, subject: str, text: str,
                  html: str | None = None, message_id: str | None = None,
                  headers: dict[str, str] | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = check_header("From", config.from_address)
    message["To"] = check_header("To", to)
    message["Subject"] = check_header("Subject", subject)
    message["Message-ID"] = check_header("Message-ID",
                                         message_id or make_msgid(domain="switchboard.local"))
    for name, value in (headers or {}).items():
        message[name] = check_header(name, value)
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


async def send_email(config: SMTPConfig, message: EmailMessage) -> None:
    try:
        await aiosmtplib.send(
            message,
            hostname=config.host,
            port=config.port,
            username=config.username,
            password=config.password,
            start_tls=config.starttls,
            timeout=config.timeout,
        )
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        log.warning("email to %s via %s:%s failed: %s", message["To"], config.host, config.port,
                    type(exc).__name__)
        raise EmailDeliveryError(f"email delivery failed: {type(exc).__name__}") from exc
