"""Outbound email over SMTP (aiosmtplib), through an organisation's own server or the platform's.

Every email leaves through this module: `send_email` for one message on a connection of its own
(invitations, a contact's message), `SmtpSession` for many on one kept-open connection (campaigns).
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from dataclasses import dataclass
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import make_msgid, parseaddr

import aiosmtplib

log = logging.getLogger("switchboard.email")

# A kept-open session tries a send again after these pauses before it gives up.
SMTP_RETRIES = (0.2, 1.0, 3.0)


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


class EmailRefused(EmailDeliveryError):
    """The server refused this recipient or this message for good: sending it again is useless."""


class EmailServerUnavailable(EmailDeliveryError):
    """The server cannot take mail now (down, refusing our sender, bad credentials): try later."""


class UnsafeHeader(EmailDeliveryError, ValueError):
    """Header text that could add a header line or end the headers (a control character, as
    written or once decoded): the message is never built, so never sent. Client text is refused
    at the API before this (400); here it guards every other path."""


# Line and paragraph separators split lines for some readers although they are not category Cc.
LINE_SEPARATORS = frozenset("\u2028\u2029\x85")
# An RFC 2047 encoded word as any reader may take one: "=?" and, anywhere after it, "?=".
# (`=?utf-8?q?A=0D=0AReply-To:_x@y.z?=` is plain ASCII without a control character, and both of
# Python's decoders turn it into a line break; the newer one even takes spaces inside a word.)
ENCODED_WORD = re.compile(r"=\?.*?\?=", re.DOTALL)


def has_control_characters(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" or char in LINE_SEPARATORS for char in text)


def has_encoded_word(text: str) -> bool:
    """Whether `text` holds an RFC 2047 encoded word (`=?charset?q|b?...?=`, any case), or
    anything a lenient reader could take for one."""
    return ENCODED_WORD.search(text) is not None


def one_line(text: str) -> str:
    """Text from elsewhere (a CRM's location name, a stored name) made fit for a header: control
    characters become spaces, and no encoded word is left for a reader to decode ("=?" -> "= ?")."""
    line = "".join(
        " " if unicodedata.category(char) == "Cc" or char in LINE_SEPARATORS else char
        for char in text
    )
    return line.replace("=?", "= ?")


def _decoded(name: str, value: str) -> list[str]:
    """`value` as readers decode it: by the parser that builds our messages (policy SMTP, as
    EmailMessage and the campaign builder use it) and by the older `decode_header`."""
    try:
        return [str(SMTP.header_factory(name, value)), str(make_header(decode_header(value)))]
    except (HeaderParseError, LookupError, UnicodeError, ValueError) as exc:
        # An undecodable word (unknown charset, bad base64) or an address that decodes to a
        # line break (the parser refuses it): nobody can say what a reader makes of it.
        raise UnsafeHeader(f"{name} holds an encoded word that cannot be decoded safely") from exc


def check_header(name: str, value: str) -> str:
    """`value`, when it is safe to write as one header line; UnsafeHeader otherwise. Checked as
    given and, when it holds encoded words, as decoded: the library decodes them when it builds
    the header, and writes what they decode to (a line break would start a header of its own)."""
    if has_control_characters(value):
        raise UnsafeHeader(f"{name} must not contain control characters")
    if has_encoded_word(value):
        for decoded in _decoded(name, value):
            if has_control_characters(decoded):
                raise UnsafeHeader(f"{name} must not decode to control characters")
            if has_encoded_word(decoded):  # decoded again by the next reader
                raise UnsafeHeader(f"{name} must not hold an encoded word inside an encoded word")
    return value


def check_folded(name: str, folded: bytes) -> bytes:
    """A header as it will be written (folded, CRLF line ends): `folded` when it is exactly one
    header, `name`, whose every further line is a continuation (begins with a space or tab);
    UnsafeHeader when a line would start a header of its own or end the headers."""
    first, *rest = folded.split(b"\r\n")
    if (
        not rest
        or rest.pop()
        or not first.lower().startswith(name.lower().encode("ascii") + b":")
        or any(b"\r" in line or b"\n" in line for line in (first, *rest))
        # A line of its own is a header of its own; an empty one (or blank: some readers
        # strip it) ends the headers.
        or any(line[:1] not in (b" ", b"\t") or not line.strip(b" \t") for line in rest)
    ):
        raise UnsafeHeader(f"{name} would not be written as one header")
    return folded


def fold_header(name: str, value: str) -> bytes:
    """The header `name: value` as it goes over SMTP (the library encodes non-ASCII text as
    RFC 2047 words itself), checked before and after folding."""
    header = SMTP.header_factory(name, check_header(name, value))
    return check_folded(name, SMTP.fold_binary(name, header))


def build_message(
    config: SMTPConfig,
    to: str,
    subject: str,
    text: str,
    html: str | None = None,
    message_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> EmailMessage:
    message = EmailMessage()
    message["From"] = check_header("From", config.from_address)
    message["To"] = check_header("To", to)
    message["Subject"] = check_header("Subject", subject)
    message["Message-ID"] = check_header(
        "Message-ID", message_id or make_msgid(domain="switchboard.local")
    )
    for name, value in (headers or {}).items():
        message[name] = check_header(name, value)
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    # Every header once more, as it will be written: one header each, nothing after its lines.
    for name, header in message.items():
        check_folded(name, SMTP.fold_binary(name, header))
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
        log.warning(
            "email to %s via %s:%s failed: %s",
            message["To"],
            config.host,
            config.port,
            type(exc).__name__,
        )
        raise EmailDeliveryError(f"email delivery failed: {type(exc).__name__}") from exc


class SmtpSession:
    """One kept-open SMTP connection, reconnected on failure; errors sorted by whose they are:
    EmailRefused for this recipient or message, EmailServerUnavailable for everything else."""

    def __init__(self, config: SMTPConfig) -> None:
        self.config = config
        self.sender = parseaddr(config.from_address)[1]
        self.client: aiosmtplib.SMTP | None = None

    async def send(self, recipient: str, data: bytes, message_id: str) -> str:
        """Send the ready-made message `data`; its `message_id` is the provider's id for it."""
        last = "no attempt"
        for delay in (0.0, *SMTP_RETRIES):
            if delay:
                await asyncio.sleep(delay)
            try:
                client = await self._connected()
                await client.sendmail(self.sender, [recipient], data)
                return message_id
            except aiosmtplib.SMTPRecipientsRefused as exc:
                raise EmailRefused("the server refused the recipient") from exc
            except aiosmtplib.SMTPResponseException as exc:
                if exc.code >= 500 and isinstance(exc, aiosmtplib.SMTPDataError):
                    raise EmailRefused(f"the server refused the message ({exc.code})") from exc
                last = f"{type(exc).__name__} {exc.code}"
                if exc.code >= 500:
                    break
            except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                last = type(exc).__name__
            await self.close()
        raise EmailServerUnavailable(f"email server unavailable ({last})")

    async def _connected(self) -> aiosmtplib.SMTP:
        if self.client is None or not self.client.is_connected:
            self.client = aiosmtplib.SMTP(
                hostname=self.config.host,
                port=self.config.port,
                username=self.config.username,
                password=self.config.password,
                start_tls=self.config.starttls,
                timeout=self.config.timeout,
            )
            await self.client.connect()
        return self.client

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None and client.is_connected:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError, TimeoutError):
                client.close()
