"""Outbound webhook HTTP: Standard Webhooks signing, an SSRF guard, and one POST per attempt.

Signing follows the Standard Webhooks spec: the secret is `whsec_<base64 key>`, and
`webhook-signature` is `v1,<base64 HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}")>`.

The SSRF guard reads the target host as a resolver would (percent-decoded, without trailing dots
or whitespace, IPv4 in any of inet_aton's forms: `2130706433`, `0x7f.1`, `017700000001`, `127.1`),
resolves it when sending, refuses it if any address it is or resolves to is not globally reachable
by the IANA special-purpose registries (integrations/special_addresses.py; CONTRACT 11), and then
connects to the very address it checked (the URL's host is swapped for that address, while the
Host header and TLS SNI / certificate check keep the original name), so DNS cannot answer
differently between the check and the connect.
Redirects are never followed, proxies from the environment are ignored. A name that does not
resolve is a failed attempt (retried on the schedule), not a refusal: only a non-public address is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import hashlib
import hmac
import ipaddress
import re
import secrets
import socket
import ssl
import time
import unicodedata
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from integrations.special_addresses import is_globally_reachable, refusing_block

SECRET_PREFIX = "whsec_"
USER_AGENT = "Switchboard-Webhooks/1.0"
TIMEOUT_SECONDS = 10.0
RESOLVE_TIMEOUT_SECONDS = 5.0
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetNotAllowed(Exception):
    """The URL is not an http(s) URL, or its host is (or resolves to) a non-public address."""


class InvalidTarget(TargetNotAllowed):
    """The URL itself is malformed: not absolute http(s), or it holds a control character."""


class ResolutionFailed(Exception):
    """The target's host name did not resolve (now): a failed attempt, not a refusal."""


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str | None
    duration_ms: int
    refused: bool = False

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


# --- signing ----------------------------------------------------------------------------------


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signing_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret; any other string is used as its UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            pass
    return secret.encode("utf-8")


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    content = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(signing_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(
    secret: str, message_id: str, body: str, timestamp: int | None = None
) -> dict[str, str]:
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, message_id, stamp, body),
    }


# --- target checks ----------------------------------------------------------------------------


# RFC 3986's unreserved and reserved characters and the percent sign.
URI_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
# A URL whose authority holds a user name or password, as the OpenAPI document refuses it.
USERINFO_PATTERN = r"^\s*[A-Za-z][A-Za-z0-9+.\-]*://[^/?#]*@"


def has_control_character(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in text)


def parse_target(url: str) -> httpx.URL:
    """An absolute http(s) URL with a host and no user name or password, written with the
    characters RFC 3986 allows (as the OpenAPI document's `format: uri` says), or
    InvalidTarget."""
    if has_control_character(url):
        raise InvalidTarget("the URL must not contain control characters")
    if not URI_CHARACTERS.fullmatch(url):
        raise InvalidTarget(
            "the URL may hold only the characters RFC 3986 allows: percent-encode "
            "others, and write an international host in its xn-- form"
        )
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise InvalidTarget("not a valid URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidTarget("the URL must be an absolute http or https URL")
    if parsed.userinfo or "@" in urllib.parse.urlsplit(url).netloc:
        # Told without the URL: it would show the password (CONTRACT 18a).
        raise InvalidTarget("the URL must not carry a user name or password (`user:password@`)")
    return parsed


def canonical_host(host: str) -> str:
    """The host as a lenient resolver reads it: percent-decoded, cut at the first whitespace or
    control character, without brackets, zone or trailing dots, in lower case."""
    text = urllib.parse.unquote(host).strip().strip("[]")
    text = re.split(r"[\s\x00-\x1f\x7f]", text, maxsplit=1)[0]
    return text.split("%", 1)[0].rstrip(".").lower()


def is_public_address(address: IPAddress) -> bool:
    """Globally reachable by the IANA special-purpose registries (integrations/
    special_addresses.py): not in any block they mark otherwise, nor carrying such an IPv4."""
    return is_globally_reachable(address)


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as an IP literal stands for, in any form resolvers accept."""
    text = canonical_host(host)
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def is_local_name(host: str) -> bool:
    name = canonical_host(host)
    return name in LOCAL_NAMES or name.endswith(".localhost")


async def resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_SECONDS
    )
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


async def checked_addresses(target: httpx.URL) -> list[IPAddress]:
    """Every address the target's host resolves to, all public; else TargetNotAllowed."""
    host = target.host
    literal = literal_address(host)
    if literal is not None:
        addresses = [literal]
    elif is_local_name(host):
        raise TargetNotAllowed("the URL points at a local host")
    else:
        try:
            addresses = await resolve(target.raw_host.decode("ascii"), target.port or _port(target))
        except (TimeoutError, OSError, UnicodeError) as exc:
            reason = str(exc) or type(exc).__name__
            raise ResolutionFailed(f"the URL's host could not be resolved ({reason})") from exc
    refused = [address for address in addresses if not is_public_address(address)]
    if refused and literal is not None and (block := refusing_block(literal)) is not None:
        raise TargetNotAllowed(
            f"the URL points at {literal}, {block.describe()}, which is not "
            "a globally reachable address"
        )
    if not addresses or refused:
        # What a name resolves to is not told: the answer would map the network around us.
        raise TargetNotAllowed(
            "the URL points at an address that is not globally reachable "
            "(private, loopback, reserved or special-purpose)"
        )
    return addresses


def _port(target: httpx.URL) -> int:
    return 443 if target.scheme == "https" else 80


async def check_target(url: str, *, allow_private: bool) -> None:
    """Creation-time check: the URL is http(s) and, unless allowed, not a private target.

    A public name that does not resolve right now is accepted: the send-time check decides.
    """
    target = parse_target(url)
    if allow_private:
        return
    try:
        await checked_addresses(target)
    except ResolutionFailed:
        return


# --- sending ----------------------------------------------------------------------------------


async def post(
    url: str,
    secret: str,
    message_id: str,
    body: str,
    *,
    allow_private: bool,
    timeout_seconds: float = TIMEOUT_SECONDS,
) -> AttemptResult:
    """One signed delivery attempt. Never raises for network or policy failures."""
    started = time.perf_counter()
    try:
        routed = await _route(url, allow_private)
    except TargetNotAllowed as exc:
        return AttemptResult(None, f"target_not_allowed: {exc}", _ms(started), refused=True)
    except ResolutionFailed as exc:
        return AttemptResult(None, f"dns_error: {exc}"[:500], _ms(started))
    try:
        async with _signed_post(routed, secret, message_id, body, {}, timeout_seconds) as response:
            return AttemptResult(response.status_code, None, _ms(started))
    except httpx.TimeoutException:
        return AttemptResult(None, "timeout", _ms(started))
    except httpx.HTTPError as exc:
        return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))
    except OSError as exc:
        return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))


@dataclass(frozen=True)
class ToolAnswer:
    """What a tool's endpoint answered: its status and the first `limit` bytes of its body, or
    the error of an attempt that got no answer (refused target, DNS, timeout, connection)."""

    status_code: int | None
    body: bytes
    content_type: str
    error: str | None
    duration_ms: int


async def post_for_answer(
    url: str,
    secret: str,
    message_id: str,
    body: str,
    *,
    allow_private: bool,
    headers: dict[str, str] | None = None,
    timeout_seconds: float = TIMEOUT_SECONDS,
    limit: int = 16 * 1024,
) -> ToolAnswer:
    """One signed POST as `post` sends it (the same signing, SSRF guard and pinned address),
    with `headers` added (the signature, content type and Host are ours), answering with the
    response: its status and the first `limit` bytes of its body. Never raises for network or
    policy failures; `timeout_seconds` bounds the whole exchange."""
    started = time.perf_counter()
    try:
        routed = await _route(url, allow_private)
    except TargetNotAllowed as exc:
        return ToolAnswer(None, b"", "", f"target_not_allowed: {exc}", _ms(started))
    except ResolutionFailed as exc:
        return ToolAnswer(None, b"", "", f"dns_error: {exc}"[:500], _ms(started))
    try:
        async with (
            asyncio.timeout(timeout_seconds),
            _signed_post(
                routed, secret, message_id, body, headers or {}, timeout_seconds
            ) as response,
        ):
            content = bytearray()
            async for chunk in response.aiter_bytes():
                content += chunk
                if len(content) >= limit:
                    break
            return ToolAnswer(
                response.status_code,
                bytes(content[:limit]),
                response.headers.get("content-type", ""),
                None,
                _ms(started),
            )
    except (TimeoutError, httpx.TimeoutException):
        return ToolAnswer(None, b"", "", "timeout", _ms(started))
    except (httpx.HTTPError, OSError) as exc:
        return ToolAnswer(None, b"", "", f"{type(exc).__name__}: {exc}"[:500], _ms(started))


Routed = tuple[httpx.URL, dict[str, str], str | None]


@functools.cache
def _tls() -> ssl.SSLContext:
    """The process's one TLS context (certificates verified, as httpx's default): building it
    loads the CA bundle, about 20 ms of CPU that a client of its own per POST would spend on
    every webhook and every http tool call."""
    return httpx.create_ssl_context()


@contextlib.asynccontextmanager
async def _signed_post(
    routed: Routed,
    secret: str,
    message_id: str,
    body: str,
    extra_headers: dict[str, str],
    timeout_seconds: float,
) -> AsyncIterator[httpx.Response]:
    """The signed POST of `body` to a routed target (`_route`), its response streamed: the
    caller's `extra_headers` first, then ours (content type, user agent, the Standard Webhooks
    signature, the pinned Host), which no extra header can replace."""
    request_url, extensions, host_header = routed
    ours = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        **signed_headers(secret, message_id, body),
    }
    sent = {
        name: value
        for name, value in extra_headers.items()
        if name.lower() not in {*ours, "host", "content-length"}
    }
    sent |= ours
    if host_header is not None:
        sent["host"] = host_header
    async with (
        httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_seconds),
            follow_redirects=False,
            trust_env=False,
            verify=_tls(),
        ) as client,
        client.stream(
            "POST", request_url, content=body.encode("utf-8"), headers=sent, extensions=extensions
        ) as response,
    ):
        yield response


async def _route(url: str, allow_private: bool) -> Routed:
    """The URL to connect to, request extensions and Host header (pinned when guarded)."""
    target = parse_target(url)
    if allow_private:
        return target, {}, None
    address = (await checked_addresses(target))[0]
    if target.host == str(address):
        return target, {}, None
    # Always connect to the checked address, even for a literal written in another form.
    host_header = target.netloc.decode("ascii")
    extensions = (
        {"sni_hostname": target.raw_host.decode("ascii")}
        if (target.scheme == "https" and literal_address(target.host) is None)
        else {}
    )
    return target.copy_with(host=str(address)), extensions, host_header


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
