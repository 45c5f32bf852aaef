"""Webhook targets refuse every address the IANA special-purpose registries do not mark globally
reachable (CONTRACT 11; issue 23 point 5): 192.0.0.8 and the rest of 192.0.0.0/24, fec0::/10,
100.64.0.0/10, 198.18.0.0/15, ..., and IPv6 addresses that carry such an IPv4 address, unless
SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS is true.

No test here sends anything to a non-loopback address: the guard is called directly, the API is
asked to create subscriptions and agents with IP literals (refused before any connection), names
resolve through the `dns` fixture, and every send goes through an httpx transport that records
the request and connects nowhere.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import httpx
import pytest

from integrations import webhooks
from integrations.special_addresses import BLOCKS, refusing_block
from integrations.webhooks import InvalidTarget, TargetNotAllowed
from tests.factories import SUBSCRIPTIONS, agent_body, make_agent
from tests.helpers import error_of, tenant_sql

AGENT = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"

# The registries as IANA states them, written out again here: (block, Globally Reachable), None
# for N/A or no value. The module's table must hold exactly these.
IPV4_REGISTRY = [
    ("0.0.0.0/8", False),
    ("0.0.0.0/32", False),
    ("10.0.0.0/8", False),
    ("100.64.0.0/10", False),
    ("127.0.0.0/8", False),
    ("169.254.0.0/16", False),
    ("172.16.0.0/12", False),
    ("192.0.0.0/24", False),
    ("192.0.0.0/29", False),
    ("192.0.0.8/32", False),
    ("192.0.0.9/32", True),
    ("192.0.0.10/32", True),
    ("192.0.0.170/32", False),
    ("192.0.0.171/32", False),
    ("192.0.2.0/24", False),
    ("192.31.196.0/24", True),
    ("192.52.193.0/24", True),
    ("192.88.99.0/24", None),
    ("192.88.99.2/32", False),
    ("192.168.0.0/16", False),
    ("192.175.48.0/24", True),
    ("198.18.0.0/15", False),
    ("198.51.100.0/24", False),
    ("203.0.113.0/24", False),
    ("240.0.0.0/4", False),
    ("255.255.255.255/32", False),
]
IPV6_REGISTRY = [
    ("::1/128", False),
    ("::/128", False),
    ("::ffff:0:0/96", False),
    ("64:ff9b::/96", True),
    ("64:ff9b:1::/48", False),
    ("100::/64", False),
    ("100:0:0:1::/64", False),
    ("2001::/23", False),
    ("2001::/32", None),
    ("2001:1::1/128", True),
    ("2001:1::2/128", True),
    ("2001:1::3/128", True),
    ("2001:2::/48", False),
    ("2001:3::/32", True),
    ("2001:4:112::/48", True),
    ("2001:10::/28", None),
    ("2001:20::/28", True),
    ("2001:30::/28", True),
    ("2001:db8::/32", False),
    ("2002::/16", None),
    ("2620:4f:8000::/48", True),
    ("3fff::/20", False),
    ("5f00::/16", False),
    ("fc00::/7", False),
    ("fe80::/10", False),
]
# From the address-space registries: multicast, and the deprecated site-local block.
OTHER_REGISTRIES = [("224.0.0.0/4", False), ("fec0::/10", False), ("ff00::/8", False)]
ALL_BLOCKS = IPV4_REGISTRY + IPV6_REGISTRY + OTHER_REGISTRIES

# Globally reachable blocks that lie inside one that is not: refused with it (anycast addresses
# served by whichever operator is nearest, within 192.0.0.0/24 and 2001::/23).
NESTED_IN_A_REFUSED_BLOCK = {
    "192.0.0.9/32",
    "192.0.0.10/32",
    "2001:1::1/128",
    "2001:1::2/128",
    "2001:1::3/128",
    "2001:3::/32",
    "2001:4:112::/48",
    "2001:20::/28",
    "2001:30::/28",
}
# Globally reachable blocks that stand alone: their addresses pass (64:ff9b::/96 carries an
# IPv4 address and is judged by it: see the embedded tests).
ALLOWED_BLOCKS = {"192.31.196.0/24", "192.52.193.0/24", "192.175.48.0/24", "2620:4f:8000::/48"}

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "193.0.6.139",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "64:ff9b::808:808",
    "64:ff9b::8.8.4.4",
    "2c0f:fb50:4003::1",
    # next to refused blocks
    "100.63.255.255",
    "100.128.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "192.0.1.0",
    "191.255.255.255",
    "223.255.255.255",
    "9.255.255.255",
    "11.0.0.0",
    "1.0.0.0",
    "2001:200::",
    "2001:200::1",
    "2003::1",
    "3ffe:ffff::1",
]

# What the issue found delivered to, and what it names.
ISSUE_EXAMPLES = [
    "192.0.0.8",
    "192.0.0.1",
    "192.0.0.11",
    "192.0.0.255",
    "fec0::1",
    "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "100.64.0.1",
    "198.18.0.1",
    "198.19.255.255",
    "192.88.99.1",
    "2001:db8::1",
    "64:ff9b:1::1",
    "2002::1",
    "240.0.0.1",
    "0.1.2.3",
    "224.0.0.251",
    "239.255.255.250",
    "ff05::1:3",
    "3fff::1",
    "5f00::1",
    "100::1",
    "2001:2::1",
    "2001:10::1",
    "4000::1",
    "::2",
]

# IPv6 forms that carry an IPv4 address that is not globally reachable.
EMBEDDED = [
    "::ffff:192.0.0.8",
    "::ffff:127.0.0.1",
    "::ffff:0:192.0.0.8",
    "::ffff:0:10.0.0.1",
    "::192.0.0.8",
    "::169.254.169.254",
    "64:ff9b::192.0.0.8",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "64:ff9b::a00:1",
    "64:ff9b::6440:1",
    "64:ff9b::",
    "64:ff9b::ffff:ffff",
    "2002:c000:8::1",
    "2002:7f00:1::1",
    "2002:a9fe:a9fe::",
]


def addresses_of(block: str) -> list[str]:
    """The block's first address, one inside it (its middle) and its last."""
    network = ipaddress.ip_network(block)
    middle = network.network_address + network.num_addresses // 2
    return [str(network.network_address), str(middle), str(network.broadcast_address)]


def refused(address: str) -> bool:
    return not webhooks.is_public_address(ipaddress.ip_address(address))


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Every request httpx would send is recorded and refused here: nothing leaves."""
    sent: list[httpx.Request] = []

    async def handle(self: Any, request: httpx.Request) -> httpx.Response:
        sent.append(request)
        raise httpx.ConnectError("no connections in this test", request=request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", handle)
    return sent


@pytest.fixture
def private_off(app: Any, monkeypatch: pytest.MonkeyPatch, worker_env: Any) -> None:
    settings = app.app.config["SETTINGS"]
    monkeypatch.setitem(
        app.app.config, "SETTINGS", settings.model_copy(update={"allow_private_webhooks": False})
    )
    worker_env(SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS="false")


# --- the table --------------------------------------------------------------------------------


def test_the_table_holds_the_registries_as_iana_states_them():
    table = [(str(block.network), block.globally_reachable) for block in BLOCKS]
    assert sorted(table, key=str) == sorted(
        [(str(ipaddress.ip_network(block)), reach) for block, reach in ALL_BLOCKS], key=str
    )
    for block in BLOCKS:
        assert block.name and block.rfc.startswith("RFC") and block.registry.startswith("IANA")


# --- the guard, block by block ----------------------------------------------------------------


@pytest.mark.parametrize(("block", "reach"), ALL_BLOCKS, ids=[block for block, _ in ALL_BLOCKS])
def test_every_registry_block_first_inside_and_last_address(block, reach):
    if block == "64:ff9b::/96":
        # True in the registry; its first and last carry 0.0.0.0 and 255.255.255.255.
        first, inside, last = addresses_of(block)
        assert (refused(first), refused(inside), refused(last)) == (True, False, True)
        return
    expected = block not in ALLOWED_BLOCKS
    assert (reach is True) == (block in ALLOWED_BLOCKS | NESTED_IN_A_REFUSED_BLOCK)
    for address in addresses_of(block):
        assert refused(address) is expected, (block, address)
        if expected:
            assert refusing_block(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ISSUE_EXAMPLES)
def test_the_addresses_the_issue_names_are_refused(address):
    assert refused(address)


@pytest.mark.parametrize("address", EMBEDDED)
def test_ipv6_carrying_a_non_global_ipv4_is_refused(address):
    assert refused(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_globally_reachable_addresses_pass(address):
    assert not refused(address)


def test_a_refusal_names_the_registry_block():
    block = refusing_block(ipaddress.ip_address("192.0.0.8"))
    assert block is not None
    assert (str(block.network), block.name, block.rfc) == (
        "192.0.0.8/32",
        "IPv4 dummy address",
        "RFC 7600",
    )
    assert str(refusing_block(ipaddress.ip_address("fec0::1")).network) == "fec0::/10"
    assert str(refusing_block(ipaddress.ip_address("64:ff9b::a9fe:a9fe")).network) == (
        "169.254.0.0/16"
    )


# --- check_target: IP literals, refused before any connection -----------------------------------


LITERAL_URLS = [
    "http://192.0.0.8/hook",
    "https://192.0.0.8:8443/hook",
    "http://3221225480/hook",
    "http://0xc0.0.0.8/hook",
    "http://0xc0000008/hook",
    "http://192.0.0.8./hook",
    "http://[fec0::1]/hook",
    "http://[FEC0::1]:8080/hook",
    "http://[fec0::1%25eth0]/hook",
    "http://100.64.0.1/hook",
    "http://198.18.0.1/hook",
    "http://192.88.99.1/hook",
    "http://[2001:db8::1]/hook",
    "http://[64:ff9b:1::1]/hook",
    "http://[2002:c000:8::1]/hook",
    "http://240.0.0.1/hook",
    "http://0.0.0.1/hook",
    "http://224.0.0.1/hook",
    "http://[ff02::1]/hook",
    "http://[::ffff:192.0.0.8]/hook",
    "http://[64:ff9b::c000:8]/hook",
    "http://[::ffff:0:c000:8]/hook",
    "http://[3fff::1]/hook",
    "http://[5f00::1]/hook",
]


@pytest.mark.parametrize("url", LITERAL_URLS)
async def test_check_target_refuses_literals_of_every_kind(url, no_connections):
    with pytest.raises(TargetNotAllowed) as raised:
        await webhooks.check_target(url, allow_private=False)
    assert not isinstance(raised.value, InvalidTarget)
    assert "not a globally reachable address" in str(raised.value)
    assert no_connections == []


@pytest.mark.parametrize("url", LITERAL_URLS)
async def test_check_target_accepts_them_when_private_targets_are_allowed(url, no_connections):
    await webhooks.check_target(url, allow_private=True)
    assert no_connections == []


@pytest.mark.parametrize(
    "address", ["192.0.0.8", "fec0::1", "100.64.0.1", "198.18.0.1", "64:ff9b::7f00:1"]
)
async def test_check_target_refuses_a_name_resolving_to_them(dns, address, no_connections):
    dns("hooks.switchboard.test", address)
    with pytest.raises(TargetNotAllowed) as raised:
        await webhooks.check_target("https://hooks.switchboard.test/x", allow_private=False)
    # The answer of the lookup is not told.
    assert address not in str(raised.value)
    assert no_connections == []


# --- sending ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://192.0.0.8/hook",
        "http://[fec0::1]/hook",
        "http://198.18.0.1:8080/hook",
        "http://[::ffff:c000:8]/hook",
    ],
)
async def test_send_to_such_a_literal_is_refused_without_connecting(url, no_connections):
    result = await webhooks.post(url, webhooks.new_secret(), "msg_1", "{}", allow_private=False)
    assert (result.refused, result.status_code) == (True, None)
    assert result.error.startswith("target_not_allowed")
    assert no_connections == []


@pytest.mark.parametrize("address", ["192.0.0.8", "fec0::1", "192.0.0.9", "2001:4:112::1"])
async def test_send_to_a_name_resolving_to_them_is_refused_without_connecting(
    dns, address, no_connections
):
    dns("rebound.switchboard.test", address)
    result = await webhooks.post(
        "https://rebound.switchboard.test/hook",
        webhooks.new_secret(),
        "msg_2",
        "{}",
        allow_private=False,
    )
    assert (result.refused, result.status_code) == (True, None)
    assert no_connections == []


async def test_with_private_targets_allowed_the_send_goes_ahead(no_connections):
    # The recording transport stands in for the network: the request is made, nothing leaves.
    result = await webhooks.post(
        "http://192.0.0.8/hook", webhooks.new_secret(), "msg_3", "{}", allow_private=True
    )
    assert not result.refused
    assert [str(request.url) for request in no_connections] == ["http://192.0.0.8/hook"]


async def test_send_to_a_public_name_connects_to_the_checked_address(dns, no_connections):
    dns("public.switchboard.test", "93.184.216.34")
    result = await webhooks.post(
        "http://public.switchboard.test/hook",
        webhooks.new_secret(),
        "msg_4",
        "{}",
        allow_private=False,
    )
    assert not result.refused
    [request] = no_connections
    assert (str(request.url), request.headers["host"]) == (
        "http://93.184.216.34/hook",
        "public.switchboard.test",
    )


# --- the API: subscriptions and agents with IP literals -----------------------------------------


API_LITERALS = [
    "192.0.0.8",
    "192.0.0.200",
    "[fec0::1]",
    "100.64.0.1",
    "198.18.0.1",
    "192.88.99.1",
    "[2001:db8::1]",
    "[64:ff9b:1::1]",
    "[2002:c000:8::1]",
    "240.0.0.1",
    "0.0.0.1",
    "224.0.0.1",
    "[ff0e::1]",
    "[::ffff:192.0.0.8]",
    "[64:ff9b::c000:8]",
    "3221225480",
    "192.0.0.9",
    "[2001:4:112::1]",
]


async def subscription_count(pool, tenant) -> int:
    rows = await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM webhook_subscriptions")
    return int(rows[0]["n"])


@pytest.mark.parametrize("host", API_LITERALS)
async def test_subscription_to_such_a_literal_is_refused_at_create(
    client, pool, tenant, private_off, no_connections, host
):
    response = await client.post(
        SUBSCRIPTIONS,
        headers=tenant.headers,
        json={"url": f"http://{host}/hook", "events": ["contact.updated"]},
    )
    error = await error_of(response, 400)
    assert error["code"] == "webhook_url_not_allowed"
    assert await subscription_count(pool, tenant) == 0
    assert no_connections == []


@pytest.mark.parametrize("host", API_LITERALS)
async def test_agent_webhook_url_of_such_a_literal_is_refused_at_create(
    client, pool, tenant, private_off, no_connections, host
):
    body = agent_body(tenant, webhook=True, webhook_url=f"https://{host}/call-ended")
    response = await client.post(AGENT, json=body, headers=tenant.headers)
    assert (await error_of(response, 400))["code"] == "webhook_url_not_allowed"
    assert await tenant_sql(pool, tenant, "SELECT id FROM agents") == []
    assert no_connections == []


@pytest.mark.parametrize("host", ["192.0.0.8", "[fec0::1]", "198.18.0.1"])
async def test_agent_patch_to_such_a_literal_is_refused_and_changes_nothing(
    client, pool, tenant, private_off, no_connections, host
):
    agent_id = await make_agent(client, tenant)
    before = await tenant_sql(pool, tenant, "SELECT * FROM agents")
    response = await client.patch(
        f"{AGENTS}/{agent_id}",
        headers=tenant.headers,
        json={"webhook": True, "webhook_url": f"http://{host}/call-ended"},
    )
    assert (await error_of(response, 400))["code"] == "webhook_url_not_allowed"
    assert await tenant_sql(pool, tenant, "SELECT * FROM agents") == before
    assert no_connections == []


async def test_subscription_to_a_name_resolving_to_192_0_0_8_is_refused_at_create(
    client, pool, tenant, private_off, dns, no_connections
):
    dns("inside.switchboard.test", "192.0.0.8")
    response = await client.post(
        SUBSCRIPTIONS,
        headers=tenant.headers,
        json={"url": "https://inside.switchboard.test/hook", "events": ["contact.updated"]},
    )
    assert (await error_of(response, 400))["code"] == "webhook_url_not_allowed"
    assert await subscription_count(pool, tenant) == 0


async def test_such_a_literal_is_accepted_while_private_targets_are_allowed(
    client, pool, tenant, no_connections
):
    # The suite runs with SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS=true.
    response = await client.post(
        SUBSCRIPTIONS,
        headers=tenant.headers,
        json={"url": "http://192.0.0.8/hook", "events": ["contact.updated"]},
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    assert await subscription_count(pool, tenant) == 1
    assert no_connections == []
