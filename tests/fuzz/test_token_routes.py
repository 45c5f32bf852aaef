"""The routes that take a signed token instead of an API key, fuzzed with Hypothesis.

The campaign tracking links (open pixel, click, unsubscribe: api/tracking/routes.py) and the
call recording link (api/calls/routes.py) are hidden from the OpenAPI document, so the
schemathesis run never reaches them. Here each gets arbitrary path segments, query strings and
tokens: random text (unicode included), very long text, percent-encoding, and genuine tokens of
a real recipient and a real recording truncated, altered, re-spelled or of another kind.

For every request: never a 5xx; the status is one the route documents; a token that is not the
genuine one (as its bytes decode, see `_Decoded`) never yields the resource (the GIF, the
redirect to the target, the unsubscribe page, the recording's audio) and changes nothing in the
sub-account. In process (the app's test client), so it runs in both CI passes.

`SWITCHBOARD_FUZZ_TOKEN_EXAMPLES` sets the examples per route (default 60: the file takes well
under 30 s); `SWITCHBOARD_FUZZ_SEED` the seed, as for tests/fuzz/test_schemathesis.py.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import asyncpg
import pytest
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

from api.tracking.tokens import sign
from tenancy.clock import utcnow
from tenancy.recording_links import recording_url
from tenancy.tables.base import tenant_metadata
from tests.calls.test_recordings import finished_call, make_wav, read_call
from tests.factories import Tenant, add_contact, create_campaign
from tests.helpers import tenant_sql

EXAMPLES = int(os.environ.get("SWITCHBOARD_FUZZ_TOKEN_EXAMPLES", "60"))
SEED = int(os.environ.get("SWITCHBOARD_FUZZ_SEED", "42"))
TARGET = "https://example.com/fuzz-target?x=1"
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)

# What each route may answer: its resource, or a refusal (400: a NUL or a path id that is not a
# UUID; 403: a recording link that is not good; 404: an unknown token, route or recording).
TRACKING_ROUTES = {  # (kind, method): the status of the resource
    ("open", "GET"): 200,
    ("click", "GET"): 302,
    ("unsubscribe", "GET"): 200,
    ("unsubscribe", "POST"): 200,
}
REFUSALS = {400, 404}
RECORDING_REFUSALS = {400, 403, 404}
# The router's answer to a path with repeated slashes: a redirect to its one-slash form.
MERGE_SLASHES = 308


# --- the sub-account's real resources -----------------------------------------------------------


@dataclass
class Resources:
    tenant: Tenant
    pool: asyncpg.Pool
    recipient_id: uuid.UUID
    tokens: dict[str, str]  # kind -> the genuine token of the recipient
    recording_link: str  # path?query
    wav: bytes
    call_id: uuid.UUID
    # The sub-account's fingerprint since the last request that was allowed to change it.
    baseline: str | None = None


@pytest.fixture
async def resources(
    client: Any, pool: Any, tenant: Tenant, worker_env: Any, tmp_path: Path
) -> Resources:
    worker_env(SWITCHBOARD_DATA_DIR=str(tmp_path))
    contact_id = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact_id])
    # The recipient as the sender writes it (recipients are written when the campaign runs).
    [row] = await tenant_sql(
        pool,
        tenant,
        "INSERT INTO campaign_recipients (campaign_id, "
        "contact_id, state, sent_at) VALUES ($1, $2, 'sent', now()) "
        "RETURNING id",
        uuid.UUID(campaign["id"]),
        uuid.UUID(contact_id),
    )
    recipient_id = row["id"]
    tokens = {
        kind: sign(kind, tenant.id, recipient_id, TARGET if kind == "click" else None)
        for kind in ("open", "click", "unsubscribe")
    }
    wav = make_wav(0.1)
    call_id = await finished_call(client, pool, tenant, wav)
    link = urlsplit((await read_call(client, tenant, call_id))["recording_url"])
    return Resources(tenant, pool, recipient_id, tokens, f"{link.path}?{link.query}", wav, call_id)


def _fingerprint_sql(schema: str) -> str:
    """One statement: a digest of every row of the tenant's schema and its control rows."""
    parts = [
        f'SELECT \'{table.name}\' AS t, x::text AS r FROM "{schema}"."{table.name}" AS x'
        for table in tenant_metadata.sorted_tables
    ]
    parts += [
        "SELECT 'due_work', x::text FROM control.due_work AS x WHERE sub_account_id = $1",
        "SELECT 'sub_accounts', x::text FROM control.sub_accounts AS x WHERE id = $1",
    ]
    return (
        "SELECT count(*) || ':' || md5(coalesce(string_agg(t || r, '|' ORDER BY t, r), ''))"
        f" FROM ({' UNION ALL '.join(parts)}) AS s"
    )


async def fingerprint(resources: Resources) -> str:
    sql = _fingerprint_sql(resources.tenant.schema)
    return str(await resources.pool.fetchval(sql, resources.tenant.id))


# --- what the fuzzer sends ----------------------------------------------------------------------

# Text of every kind: any unicode (no lone surrogates: a URL cannot carry them), URL-ish and
# base64url-ish alphabets, and very long runs.
ANY_TEXT = st.text(max_size=80)
URLISH = st.text(alphabet="abcAZ09-_.~%/?#&=+:;@!$'()*, \t\"<>\\^`{|}", max_size=80)
BASE64ISH = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=.", max_size=120
)
PRINTABLE_ASCII = "".join(chr(code) for code in range(0x21, 0x7F))
LONG = st.builds(
    lambda unit, times: unit * times,
    st.sampled_from(["A", "a.", "%41", "é", "."]),
    st.integers(1000, 12000),
)


@st.composite
def mutated(draw: st.DrawFn, token: str) -> str:
    """The token truncated, with a character replaced, inserted, removed or case-flipped, its
    parts swapped or doubled, padded, extended, or percent-encoded (wholly or in part)."""
    how = draw(
        st.sampled_from(
            [
                "truncate",
                "replace",
                "insert",
                "delete",
                "case",
                "swap",
                "double",
                "encode",
                "encode_one",
                "pad",
                "suffix",
            ]
        )
    )
    at = draw(st.integers(0, max(len(token) - 1, 0)))
    if how == "truncate":
        return token[:at]
    if how == "replace":
        return token[:at] + draw(st.characters()) + token[at + 1 :]
    if how == "insert":
        return token[:at] + draw(st.characters()) + token[at:]
    if how == "delete":
        return token[:at] + token[at + 1 :]
    if how == "case":
        return token[:at] + token[at : at + 1].swapcase() + token[at + 1 :]
    if how == "swap":
        body, _, mac = token.partition(".")
        return f"{mac}.{body}"
    if how == "double":
        return f"{token}.{token}"
    if how == "encode":
        return "".join(f"%{byte:02X}" for byte in token.encode())
    if how == "encode_one" and token:
        return token[:at] + f"%{ord(token[at]):02x}" + token[at + 1 :]
    if how == "pad":
        return token + "=" * draw(st.integers(1, 4))
    return token + draw(ANY_TEXT)


@st.composite
def path_segments(draw: st.DrawFn, genuine: list[str], weight: int = 1) -> str:
    """A path segment as the client writes it: percent-encoded unless it chose to send
    `%`-sequences (valid or not) of its own. `weight`: how much likelier than each other
    source the genuine values are (so that requests get past one segment to the next check)."""
    source = draw(
        st.sampled_from(["genuine"] * weight + ["mutated", "text", "urlish", "base64ish", "long"])
    )
    if source == "genuine":
        value = draw(st.sampled_from(genuine))
    elif source == "mutated":
        value = draw(mutated(draw(st.sampled_from(genuine))))
    else:
        value = draw(
            {"text": ANY_TEXT, "urlish": URLISH, "base64ish": BASE64ISH, "long": LONG}[source]
        )
    if draw(st.booleans()):
        # Raw, as far as HTTP allows: its `%` sequences are decoded by the server, its `/` split
        # the path, its `?` starts the query; spaces, controls and non-ASCII go as UTF-8 `%XX`.
        return quote(value, safe=PRINTABLE_ASCII)
    return quote(value, safe="")


@st.composite
def query_strings(draw: st.DrawFn, genuine: list[tuple[str, str]]) -> str:
    """A query string (ASCII, as it travels): pairs of text, the genuine pairs or their
    mutations, duplicated or not, or raw text."""
    if draw(st.integers(0, 9)) == 0:
        return quote(draw(URLISH | ANY_TEXT), safe="=&%+")
    pairs = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["genuine", "mutated", "text"]))
        if kind == "text" or not genuine:
            pairs.append((draw(ANY_TEXT), draw(ANY_TEXT | LONG)))
            continue
        name, value = draw(st.sampled_from(genuine))
        if kind == "mutated":
            value = draw(mutated(value))
        pairs.append((name, value))
    return urlencode(pairs)


# --- telling the genuine token from the others --------------------------------------------------


def _b64(text: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        return None


@dataclass(frozen=True)
class _Decoded:
    """A tracking token as its bytes: base64 decoders ignore padding bits, stray padding and
    characters outside the alphabet, so several spellings carry one token's bytes; those are the
    genuine token, any other is not."""

    body: bytes | None
    mac: bytes | None

    @classmethod
    def of(cls, token: str) -> _Decoded:
        if token.count(".") != 1:
            return cls(None, None)
        body, _, mac = token.partition(".")
        return cls(_b64(body), _b64(mac))

    def is_(self, other: _Decoded) -> bool:
        return self.body is not None and self.mac is not None and self == other


def _as_served(url: str) -> tuple[str, str]:
    """(path, query) of `url` as the app sees them: the first `?` starts the query (even one a
    raw segment carried), and the path is percent-decoded, as a server does."""
    path, _, query = url.partition("?")
    return unquote(path), query


def _is_slash_merge(response: Any, url: str) -> bool:
    """Whether the answer is the router's redirect of a path with repeated slashes to the same
    path and query with single slashes, and nothing else (no resource, no other place)."""
    if response.status_code != MERGE_SLASHES:
        return False
    path, query = _as_served(url)
    location = urlsplit(response.headers["Location"])
    return (
        location.netloc in ("", "localhost")
        and "//" in path
        and unquote(location.path) == re.sub("/{2,}", "/", path)
        and location.query == query
    )


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if len(text) == 36 else None
    except ValueError:
        return None


# --- tracking routes ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "method"), sorted(TRACKING_ROUTES))
@seed(SEED)
@FUZZ
@given(data=st.data())
async def test_tracking_route_answers_any_token_as_documented(
    kind: str, method: str, client: Any, resources: Resources, data: st.DataObject
) -> None:
    genuine = resources.tokens[kind]
    # The other kinds' genuine tokens are real tokens, and not this route's.
    candidates = [genuine, *(token for other, token in resources.tokens.items() if other != kind)]
    segment = data.draw(path_segments(candidates), label="segment")
    query = data.draw(query_strings([("utm", "x")]), label="query")
    if resources.baseline is None:
        resources.baseline = await fingerprint(resources)

    path = f"/track/{kind}/{segment}" + (f"?{query}" if query else "")
    response = await client.open(path, method=method)
    status = response.status_code
    body = await response.get_data()
    token = _as_served(path)[0].removeprefix(f"/track/{kind}/")
    matches = _Decoded.of(token).is_(_Decoded.of(genuine))
    resource = TRACKING_ROUTES[(kind, method)]
    event(f"{status} {'genuine' if matches else 'not genuine'}")

    assert status < 500, (path, status, body[:300])
    if _is_slash_merge(response, path):
        assert await fingerprint(resources) == resources.baseline, f"{path} changed something"
        return
    if matches:
        assert status in REFUSALS | {resource}, (path, status, body[:300])
        resources.baseline = await fingerprint(resources)
        return
    assert status in REFUSALS, (path, status, body[:300])
    assert "Location" not in response.headers, (path, response.headers["Location"])
    assert not body.startswith(b"GIF8") and b"unsubscribed" not in body, (path, body[:300])
    assert await fingerprint(resources) == resources.baseline, f"{path} changed the sub-account"


# Campaign hrefs as a client might write them: any text, URLs with odd hosts, ports, IPv6
# literals, over-long labels, control characters and non-ASCII.
HREFS = st.one_of(
    ANY_TEXT,
    st.builds(lambda host, path: f"https://{host}/{path}", ANY_TEXT, URLISH),
    st.builds(lambda port: f"https://example.com:{port}/x", st.text(max_size=8)),
    st.builds(
        lambda host: f"http://[{host}]/", st.text(alphabet="0123456789abcdef:.%z", max_size=24)
    ),
    st.builds(lambda size: "https://" + "a" * size + ".example/", st.integers(60, 70)),
    st.builds(
        lambda text: f"https://example.com/{text}",
        st.text(
            alphabet=st.characters(codec="utf-8", categories=["Cc", "Zs", "Lo", "So"]), max_size=10
        ),
    ),
)


@seed(SEED)
@FUZZ
@given(href=HREFS)
async def test_click_on_any_signed_href_redirects_there_or_is_404(
    client: Any, resources: Resources, href: str
) -> None:
    """A genuine click token whose href cannot be followed answers 404, never 500 (CONTRACT
    11, 11a); one that can answers 302 with a Location header that is one clean line."""
    token = sign("click", resources.tenant.id, resources.recipient_id, href)
    response = await client.get(f"/track/click/{token}")
    event(str(response.status_code))
    assert response.status_code in (302, 404), (href, response.status_code)
    if response.status_code == 302:
        location = response.headers["Location"]
        assert location.isascii() and location.isprintable(), (href, location)


async def test_genuine_tracking_tokens_still_work(client: Any, resources: Resources) -> None:
    """The control: the fuzzed routes do answer their genuine tokens with the resource."""
    for (kind, method), status in sorted(TRACKING_ROUTES.items()):
        response = await client.open(f"/track/{kind}/{resources.tokens[kind]}", method=method)
        assert response.status_code == status, (kind, method)
    response = await client.get(f"/track/click/{resources.tokens['click']}")
    assert response.headers["Location"] == TARGET


# --- the recording route ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Link:
    sub_account_id: uuid.UUID | None
    call_id: uuid.UUID | None
    expires: int | None
    signature: str | None


def _link_of(url: str) -> _Link:
    """The link the route would read: ids as UUIDs, `expires` as a number (its first value)."""
    path, query = _as_served(url)
    match = re.fullmatch(r"/recordings/([^/]*)/([^/]*)\.wav", path)
    args: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        args.setdefault(name, value)
    expires = args.get("expires")
    return _Link(
        _uuid(match.group(1)) if match else None,
        _uuid(match.group(2)) if match else None,
        int(expires) if expires and re.fullmatch(r"[0-9]{1,12}", expires) else None,
        args.get("signature"),
    )


@seed(SEED)
@FUZZ
@given(data=st.data())
async def test_recording_route_answers_any_link_as_documented(
    client: Any, resources: Resources, data: st.DataObject
) -> None:
    path, _, query = resources.recording_link.partition("?")
    sub_account, call = path.removeprefix("/recordings/").removesuffix(".wav").split("/")
    expired = urlsplit(
        recording_url(
            None, resources.tenant.id, resources.call_id, now=utcnow() - timedelta(days=8)
        )
    ).query
    other_call = urlsplit(recording_url(None, resources.tenant.id, uuid.uuid4())).query
    first = data.draw(
        path_segments([sub_account, str(uuid.uuid4()), sub_account.upper()], 4),
        label="sub_account_id",
    )
    second = data.draw(path_segments([call, str(uuid.uuid4()), f"{call}.wav"], 4), label="call_id")
    asked = data.draw(
        st.one_of(
            st.sampled_from([query, expired, other_call, ""]),
            query_strings(parse_qsl(query) + parse_qsl(expired)),
        ),
        label="query",
    )
    method = data.draw(st.sampled_from(["GET", "HEAD"]), label="method")
    if resources.baseline is None:
        resources.baseline = await fingerprint(resources)

    target = f"/recordings/{first}/{second}.wav"
    url = target + (f"?{asked}" if asked else "")
    response = await client.open(url, method=method)
    status = response.status_code
    body = await response.get_data()
    matches = _link_of(url) == _link_of(resources.recording_link)
    event(f"{status} {'genuine' if matches else 'not genuine'}")

    assert status < 500, (url, status, body[:300])
    if _is_slash_merge(response, url):
        pass
    elif matches:
        assert status in RECORDING_REFUSALS | {200}, (url, status)
    else:
        assert status in RECORDING_REFUSALS, (url, status, body[:300])
        assert response.headers.get("Content-Type") != "audio/wav", url
        assert resources.wav[44:] not in body, url
    # A recording link never writes, not even the genuine one.
    assert await fingerprint(resources) == resources.baseline, f"{url} wrote"


async def test_genuine_recording_link_still_works(client: Any, resources: Resources) -> None:
    response = await client.get(resources.recording_link)
    assert response.status_code == 200
    assert await response.get_data() == resources.wav
