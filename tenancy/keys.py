"""API keys: `sb_` + 43 random URL-safe characters, stored only as a keyed hash.

The key carries 256 bits of entropy, so a slow password hash buys nothing: HMAC-SHA256 with a
server-side pepper is the right tool. It is fast on every request, and a leaked table alone
lets no one test guesses. Lookup is by the hash, which reveals nothing about other keys.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from tenancy.settings import Settings, get_settings

PREFIX = "sb_"


def generate_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return _hash(get_settings().key_pepper, key)


def key_hashes(key: str) -> list[bytes]:
    """The key's hash under the pepper, then under SWITCHBOARD_KEY_PEPPER_PREVIOUS when set:
    keys issued before a change of pepper keep working."""
    return [_hash(pepper, key) for pepper in peppers()]


def peppers(settings: Settings | None = None) -> list[str]:
    """The pepper that signs and hashes now, then the previous one (which only verifies)."""
    settings = settings or get_settings()
    previous = settings.key_pepper_previous
    return [settings.key_pepper] + (
        [previous] if previous and previous != settings.key_pepper else []
    )


def _hash(pepper: str, key: str) -> bytes:
    return hmac.new(pepper.encode(), key.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


def looks_like_key(key: str) -> bool:
    return key.startswith(PREFIX) and 32 <= len(key) - len(PREFIX) <= 128 and key.isascii()


def display_prefix(key: str) -> str:
    return key[:10]


def hash_token(token: str) -> bytes:
    """Invitation tokens are random UUIDs: a plain SHA-256 is enough to keep them unreadable."""
    return hashlib.sha256(token.encode()).digest()
