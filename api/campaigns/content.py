"""A campaign email for one recipient: tracked links, an open pixel and an unsubscribe link."""

from __future__ import annotations

import html
import re
import socket
import urllib.parse
import uuid
from dataclasses import dataclass

from werkzeug.urls import iri_to_uri

from api.tracking.tokens import sign
from integrations.email import has_control_characters
from tenancy.settings import get_settings

# Every href attribute, its value double-quoted, single-quoted or unquoted (HTML's three forms).
HREF = re.compile(
    r"""(?<![\w-])(href\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""", re.IGNORECASE
)
# A browser reads an href without leading and trailing C0 controls and spaces, and without any
# tab or newline (WHATWG URL): what is left decides whether it is a web link.
URL_EDGES = "".join(map(chr, range(0x21)))
URL_DROPPED = dict.fromkeys(map(ord, "\t\n\r"))
WEB_LINK = re.compile(r"https?:", re.IGNORECASE)
ABSOLUTE_WEB_URL = re.compile(r"https?://", re.IGNORECASE)
# Code points a host may not hold (WHATWG URL's forbidden domain code points, less those the
# split into parts already takes out).
FORBIDDEN_HOST = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
NUMERIC_LABEL = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)")
PORT = re.compile(r"[0-9]*")
# A numeric character reference, which HTML decodes (or drops, or maps from Windows-1252) even
# when it names a control character.
# (Past seven digits it names no character at all.)
NUMERIC_REFERENCE = re.compile(
    r"&#(?:[xX]0*([0-9a-fA-F]{1,7})(?![0-9a-fA-F])|0*([0-9]{1,7})(?![0-9]))"
)
MAX_HOST = 253
# A click token carries the URL (base64 of 33 bytes and the URL, a dot, a 22-character MAC): a
# link of at most this many UTF-8 bytes keeps it within the 4096 characters (tokens.MAX_TOKEN)
# verify takes.
MAX_LINK_BYTES = 3000
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


@dataclass(frozen=True)
class Link:
    """One href of a body that a recipient's client follows over http(s)."""

    match: re.Match[str]
    url: str  # the attribute's value, character references decoded


def web_links(content: str) -> list[Link]:
    """The http(s) links of an email body as a recipient's client will follow them: every href
    whose decoded value a browser reads as an http or https URL."""
    found = []
    for match in HREF.finditer(content):
        value = html.unescape(next(group for group in match.groups()[1:] if group is not None))
        if WEB_LINK.match(value.strip(URL_EDGES).translate(URL_DROPPED)):
            found.append(Link(match, value))
    return found


def _host_problem(netloc: str) -> str | None:
    """What makes a URL's authority unusable: a bad port, IPv6 literal or DNS name."""
    host_port = netloc.rpartition("@")[2]
    if host_port.startswith("["):
        literal, bracket, port = host_port[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return "has a bad IPv6 literal"
        try:
            socket.inet_pton(socket.AF_INET6, literal)
        except (OSError, ValueError):
            return "has a bad IPv6 literal"
        port = port[1:]
    else:
        host, _, port = host_port.partition(":")
        if ":" in port:
            return "has a bad port"
        if problem := _name_problem(host):
            return problem
    digits = port.lstrip("0")
    if not PORT.fullmatch(port) or (
        port and not (len(digits) <= 5 and 0 < int(digits or 0) <= 65535)
    ):
        return "has a bad port (1 to 65535)"
    return None


def _name_problem(host: str) -> str | None:
    if not host:
        return "has no host"
    if FORBIDDEN_HOST.search(host):
        return "has a character a host cannot hold"
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return "has a bad host name (a label empty, over 63 characters or not allowed)"
    if len(ascii_host.rstrip(".")) > MAX_HOST:
        return f"has a host name over {MAX_HOST} characters"
    last = ascii_host.rstrip(".").rsplit(".", 1)[-1]
    if NUMERIC_LABEL.fullmatch(last):
        try:
            socket.inet_aton(ascii_host.rstrip("."))
        except (OSError, ValueError):
            return "has a bad IPv4 address"
    return None


def _references_a_control_character(text: str) -> bool:
    for match in NUMERIC_REFERENCE.finditer(text):
        hexadecimal, decimal = match.groups()
        number = int(hexadecimal, 16) if hexadecimal is not None else int(decimal)
        if number < 0x20 or 0x7F <= number <= 0x9F:
            return True
    return False


def link_problem(url: str) -> str | None:
    """Why a link could not be followed (a click on it answers 404), or None."""
    if has_control_characters(url):
        return "holds a control character"
    if not ABSOLUTE_WEB_URL.match(url):
        return "is not an absolute http(s) URL"
    try:
        netloc = urllib.parse.urlsplit(url).netloc
    except ValueError:
        return "is not a valid URL"
    if problem := _host_problem(netloc):
        return problem
    try:
        iri_to_uri(url)
    except (ValueError, UnicodeError):
        return "is not a valid URL"
    return None


def location(url: str | None) -> str | None:
    """Where a click on a tracked link redirects: the link as a URI, None if it cannot be
    followed (signed before links were checked when a campaign is written)."""
    if not url or link_problem(url) is not None:
        return None
    return iri_to_uri(url)


def check_links(content: str) -> str:
    """Refuse a body with a link that cannot be tracked and followed: not a valid URL (bad
    port, IPv6 literal or host name), or holding whitespace or a control character, raw or as
    a character reference such as `&#13;`. Found when the campaign is written, not when a
    recipient clicks."""
    try:
        links = web_links(content)
    except ValueError:  # html.unescape: a numeric character reference of thousands of digits
        raise ValueError("a character reference has too many digits") from None
    for link in links:
        shown = link.match.group(0)[:120]
        if (
            any(char.isspace() for char in link.url)
            or has_control_characters(link.url)
            or _references_a_control_character(link.match.group(0))
        ):
            raise ValueError(f"links must not hold whitespace or control characters: {shown!r}")
        if problem := link_problem(link.url):
            raise ValueError(f"a link {problem}: {shown!r}")
        if len(link.url.encode()) > MAX_LINK_BYTES:
            raise ValueError(f"a link has at most {MAX_LINK_BYTES} bytes: {shown[:60]!r}")
    return content


def render(content: str, sub_account_id: uuid.UUID, recipient_id: uuid.UUID) -> RenderedEmail:
    links = {link.match.start(): link.url for link in web_links(content)}

    def tracked(match: re.Match[str]) -> str:
        url = links.get(match.start())
        if url is None:
            return match.group(0)
        token = sign("click", sub_account_id, recipient_id, url)
        return f'{match.group(1)}"{tracking_url("click", token)}"'

    unsubscribe = tracking_url("unsubscribe", sign("unsubscribe", sub_account_id, recipient_id))
    pixel = tracking_url("open", sign("open", sub_account_id, recipient_id))
    footer = (
        f'<p style="font-size:12px;color:#666"><a href="{unsubscribe}">Unsubscribe</a></p>'
        f'<img src="{pixel}" width="1" height="1" alt="" style="display:none">'
    )
    body = HREF.sub(tracked, content)
    found = BODY_END.search(body)
    body = body[: found.start()] + footer + body[found.start() :] if found else body + footer
    return RenderedEmail(
        body, f"{plain_text(content)}\n\nUnsubscribe: {unsubscribe}\n", unsubscribe
    )


def plain_text(content: str) -> str:
    """A readable text alternative of an HTML body."""
    text = re.sub(r"<\s*(br|/p|/div|/h\d|/li)\s*/?>", "\n", content, flags=re.IGNORECASE)
    text = html.unescape(TAG.sub("", text))
    return BLANK_LINES.sub("\n\n", text).strip()
