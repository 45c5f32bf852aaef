"""integrations/webhooks.py: Standard Webhooks signing and the SSRF guard."""

from __future__ import annotations

import ipaddress

import pytest

from integrations import webhooks
from integrations.webhooks import TargetNotAllowed
from tests.receiver import signature_valid


def test_signature_matches_the_standard_webhooks_reference_vector():
    signature = webhooks.sign(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        '{"test": 2432232314}',
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_new_secret_is_whsec_with_a_32_byte_key():
    secret = webhooks.new_secret()
    assert secret.startswith("whsec_")
    assert len(webhooks.signing_key(secret)) == 32
    assert webhooks.new_secret() != secret


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "2002:7f00:1::1",
    ],
)
def test_non_public_addresses_are_refused(address):
    assert not webhooks.is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert webhooks.is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8080/",
        "http://api.localhost/",
        "http://[::1]:80/",
        "http://10.0.0.1/",
        "http://0x7f000001/",
        "http://2130706433/",
    ],
)
async def test_check_target_refuses_local_targets(url):
    with pytest.raises(TargetNotAllowed):
        await webhooks.check_target(url, allow_private=False)


async def test_check_target_allows_local_targets_when_setting_is_on():
    await webhooks.check_target("http://127.0.0.1:9/hook", allow_private=True)


async def test_name_resolving_to_any_private_address_is_refused(monkeypatch):
    async def resolve(host, port):
        return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.7")]

    monkeypatch.setattr(webhooks, "resolve", resolve)
    with pytest.raises(TargetNotAllowed):
        await webhooks.check_target("https://hooks.example.test/x", allow_private=False)
    result = await webhooks.post(
        "https://hooks.example.test/x", webhooks.new_secret(), "msg_1", "{}", allow_private=False
    )
    assert result.refused and result.status_code is None


async def test_send_connects_to_the_checked_address_with_the_original_host(monkeypatch, receiver):
    # DNS for the name answers loopback; the guard is told loopback is public for this test,
    # so the request must go to the address that was checked, carrying the name as Host.
    async def resolve(host, port):
        assert host == "hooks.example.test"
        return [ipaddress.ip_address("127.0.0.1")]

    monkeypatch.setattr(webhooks, "resolve", resolve)
    monkeypatch.setattr(webhooks, "is_public_address", lambda address: True)
    secret = webhooks.new_secret()
    result = await webhooks.post(
        f"http://hooks.example.test:{receiver.port}/pinned",
        secret,
        "msg_2",
        '{"a":1}',
        allow_private=False,
    )
    assert result.status_code == 200
    [request] = receiver.requests
    assert request.path == "/pinned"
    assert request.headers["host"] == f"hooks.example.test:{receiver.port}"
    assert signature_valid(secret, request)


async def test_https_send_keeps_the_name_for_sni(monkeypatch):
    async def resolve(host, port):
        return [ipaddress.ip_address("93.184.216.34")]

    monkeypatch.setattr(webhooks, "resolve", resolve)
    url, extensions, host = await webhooks._route("https://hooks.example.test/x?y=1", False)
    assert str(url) == "https://93.184.216.34/x?y=1"
    assert extensions == {"sni_hostname": "hooks.example.test"}
    assert host == "hooks.example.test"


async def test_slow_receiver_is_a_timeout(receiver):
    receiver.script("/slow", "hang")
    result = await webhooks.post(
        receiver.url("/slow"),
        webhooks.new_secret(),
        "msg_3",
        "{}",
        allow_private=True,
        timeout_seconds=0.2,
    )
    assert (result.status_code, result.error, result.refused) == (None, "timeout", False)


async def test_refused_connection_is_an_error_not_an_exception(receiver):
    port = receiver.port
    await receiver.stop()
    result = await webhooks.post(
        f"http://127.0.0.1:{port}/x", webhooks.new_secret(), "msg_4", "{}", allow_private=True
    )
    assert result.status_code is None and result.error and not result.refused


async def test_name_that_does_not_resolve_is_a_failed_attempt_not_a_refusal(dns):
    result = await webhooks.post(
        "https://gone.switchboard.test/x", webhooks.new_secret(), "msg_5", "{}", allow_private=False
    )
    assert (result.status_code, result.refused) == (None, False)
    assert result.error.startswith("dns_error")
    # At creation the same name is accepted: the send-time check decides.
    await webhooks.check_target("https://gone.switchboard.test/x", allow_private=False)


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1.", "127.0.0.1"),
        ("127.0.0.1%09", "127.0.0.1"),
        ("127.0.0.1%20x", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:7f00:1"),
        ("8.8.8.8.", "8.8.8.8"),
    ],
)
def test_literal_hosts_are_read_as_a_resolver_reads_them(host, address):
    assert webhooks.literal_address(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "hooks.example.com.", "1.2.3.4.5", "exa%41mple"])
def test_names_are_not_literals(host):
    assert webhooks.literal_address(host) is None
