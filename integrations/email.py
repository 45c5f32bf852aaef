"""Outbound email over SMTP (aiosmtplib), through an organisation's own server or the platform's."""

from __future__ import annotations

import logging
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


def build_message(config: SMTPConfig, to: str, subject: str, text: str,
                  html: str | None = None, message_id: str | None = None,
                  headers: dict[str, str] | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = config.from_address
    message["To"] = to
    message["Subject"] = subject
    message["Message-ID"] = message_id or make_msgid(domain="switchboard.local")
    for name, value in (headers or {}).items():
        message[name] = value
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
