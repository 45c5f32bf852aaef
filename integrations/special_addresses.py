"""Which IP addresses are globally reachable, by the IANA registries (CONTRACT 11).

The data is the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890), row for row,
each block with its name, its RFC and its "Globally Reachable" value as the registry states it
(`True`, `False`, or `None` where the registry says N/A or, for a deprecated block, nothing).
Three rows come from the registries of the address space around them, for blocks the
special-purpose registries leave out: IPv4 multicast, IPv6 multicast and the deprecated IPv6
site-local block. And IPv6 has one more rule from the IANA IPv6 Address Space registry: only
2000::/3 is allocated as global unicast.

An address is globally reachable here when
- no block of the table that holds it says anything but True (a True block inside a False one,
  such as 192.0.0.9/32 inside 192.0.0.0/24, stays refused: anycast addresses answered by the
  nearest operator's server, not a public host of anyone's choosing),
- an IPv6 address is in 2000::/3 or in a block the registry marks globally reachable
  (64:ff9b::/96, the NAT64 well-known prefix), and
- an IPv6 address that carries an IPv4 address in a fixed place (IPv4-mapped, IPv4-translated,
  IPv4-compatible, NAT64 well-known prefix, 6to4) carries a globally reachable one.

Python's `ipaddress.is_global` is not used: in 3.11 it passes 192.0.0.8, the rest of
192.0.0.0/24, fec0::/10, 3fff::/20, 5f00::/16 and others.

Sources: https://www.iana.org/assignments/iana-ipv4-special-registry (last updated 2025-07),
https://www.iana.org/assignments/iana-ipv6-special-registry (last updated 2025-10),
https://www.iana.org/assignments/ipv6-address-space,
https://www.iana.org/assignments/multicast-addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

IPV4_SPECIAL = "IANA IPv4 Special-Purpose Address Registry"
IPV6_SPECIAL = "IANA IPv6 Special-Purpose Address Registry"
IPV4_MULTICAST = "IANA IPv4 Multicast Address Space Registry"
IPV6_SPACE = "IANA Internet Protocol Version 6 Address Space"


@dataclass(frozen=True)
class Block:
    network: IPNetwork
    name: str
    rfc: str
    registry: str
    # The registry's "Globally Reachable": True, False, or None for N/A (or no value).
    globally_reachable: bool | None
    # True for the one rule that refuses what lies outside the block (IPv6 Global Unicast).
    outside: bool = False

    def describe(self) -> str:
        return f"{'outside' if self.outside else 'in'} {self.network} ({self.name}, {self.rfc})"


def _block(
    network: str, name: str, rfc: str, registry: str, globally_reachable: bool | None
) -> Block:
    return Block(ipaddress.ip_network(network), name, rfc, registry, globally_reachable)


# (Address Block, Name, RFC, Globally Reachable), in the registries' order.
_IPV4_SPECIAL_ROWS: tuple[tuple[str, str, str, bool | None], ...] = (
    ("0.0.0.0/8", "This network", "RFC 791, Section 3.2", False),
    ("0.0.0.0/32", "This host on this network", "RFC 1122, Section 3.2.1.3", False),
    ("10.0.0.0/8", "Private-Use", "RFC 1918", False),
    ("100.64.0.0/10", "Shared Address Space", "RFC 6598", False),
    ("127.0.0.0/8", "Loopback", "RFC 1122, Section 3.2.1.3", False),
    ("169.254.0.0/16", "Link Local", "RFC 3927", False),
    ("172.16.0.0/12", "Private-Use", "RFC 1918", False),
    ("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890, Section 2.1", False),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", False),
    ("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", False),
    ("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", True),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", False),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", False),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", False),
    ("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    ("192.52.193.0/24", "AMT", "RFC 7450", True),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", None),
    ("192.88.99.2/32", "6a44-relay anycast address", "RFC 6751", False),
    ("192.168.0.0/16", "Private-Use", "RFC 1918", False),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", True),
    ("198.18.0.0/15", "Benchmarking", "RFC 2544", False),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", False),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", False),
    ("240.0.0.0/4", "Reserved", "RFC 1112, Section 4", False),
    ("255.255.255.255/32", "Limited Broadcast", "RFC 8190, RFC 919 Section 7", False),
)

_IPV6_SPECIAL_ROWS: tuple[tuple[str, str, str, bool | None], ...] = (
    ("::1/128", "Loopback Address", "RFC 4291", False),
    ("::/128", "Unspecified Address", "RFC 4291", False),
    ("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", False),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC 6052", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC 8215", False),
    ("100::/64", "Discard-Only Address Block", "RFC 6666", False),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", False),
    ("2001::/23", "IETF Protocol Assignments", "RFC 2928", False),
    ("2001::/32", "TEREDO", "RFC 4380, RFC 8190", None),
    ("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", True),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", True),
    ("2001:2::/48", "Benchmarking", "RFC 5180, RFC Errata 1752", False),
    ("2001:3::/32", "AMT", "RFC 7450", True),
    ("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    ("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", None),
    ("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", True),
    ("2001:db8::/32", "Documentation", "RFC 3849", False),
    ("2002::/16", "6to4", "RFC 3056", None),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", True),
    ("3fff::/20", "Documentation", "RFC 9637", False),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", False),
    ("fc00::/7", "Unique-Local", "RFC 4193, RFC 8190", False),
    ("fe80::/10", "Link-Local Unicast", "RFC 4291", False),
)

# Blocks the special-purpose registries leave to the address-space registries: not unicast, or
# withdrawn. None of them is globally reachable unicast.
_OTHER_ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("224.0.0.0/4", "Multicast", "RFC 5771", IPV4_MULTICAST),
    ("fec0::/10", "Reserved by IETF (deprecated site-local)", "RFC 3879", IPV6_SPACE),
    ("ff00::/8", "Multicast", "RFC 4291", IPV6_SPACE),
)

BLOCKS: tuple[Block, ...] = (
    *(
        _block(network, name, rfc, IPV4_SPECIAL, reach)
        for network, name, rfc, reach in _IPV4_SPECIAL_ROWS
    ),
    *(
        _block(network, name, rfc, IPV6_SPECIAL, reach)
        for network, name, rfc, reach in _IPV6_SPECIAL_ROWS
    ),
    *(_block(network, name, rfc, registry, False) for network, name, rfc, registry in _OTHER_ROWS),
)

# IANA IPv6 Address Space: the only block allocated as Global Unicast (RFC 4291).
IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
IPV6_OUTSIDE_GLOBAL_UNICAST = Block(
    IPV6_GLOBAL_UNICAST, "Global Unicast", "RFC 4291", IPV6_SPACE, False, outside=True
)

# Where an IPv6 address carries an IPv4 address in its last 32 bits.
_IPV4_IN_LAST_32 = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "::ffff:0:0/96",  # IPv4-mapped (RFC 4291)
        "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765)
        "::/96",  # IPv4-compatible, deprecated (RFC 4291)
        "64:ff9b::/96",  # NAT64 well-known prefix (RFC 6052)
    )
)
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


def blocks_of(address: IPAddress) -> list[Block]:
    """The table's blocks that hold the address, widest first."""
    found = [
        block
        for block in BLOCKS
        if block.network.version == address.version and address in block.network
    ]
    return sorted(found, key=lambda block: block.network.prefixlen)


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries in a fixed place, if it carries one."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    for network in _IPV4_IN_LAST_32:
        # :: and ::1 are the unspecified and loopback addresses, not IPv4-compatible ones.
        if address in network and int(address) > 1:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusing_block(address: IPAddress) -> Block | None:
    """The block that makes an address not globally reachable, or None when it is."""
    address = _without_scope(address)
    held = blocks_of(address)
    for block in reversed(held):  # the most specific that refuses it names it best
        if block.globally_reachable is not True:
            return block
    if (
        isinstance(address, ipaddress.IPv6Address)
        and address not in IPV6_GLOBAL_UNICAST
        and not held
    ):
        return IPV6_OUTSIDE_GLOBAL_UNICAST
    inner = embedded_ipv4(address)
    if inner is not None:
        return refusing_block(inner)
    return None


def is_globally_reachable(address: IPAddress) -> bool:
    return refusing_block(address) is None


def _without_scope(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        return ipaddress.IPv6Address(int(address))
    return address
