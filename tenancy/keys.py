"""API keys: `sb_` + 43 random URL-safe characters, stored only as a keyed hash.

The key carries 256 bits of entropy, so a slow password hash buys nothing: HMAC-SHA256 with a
server-side pepper is the right tool. It is fast on every request, and a leaked table alone
lets no one test guesses. Lookup is by the hash, which reveals nothing about other keys.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from tenancy.settings import get_settings

PREFIX = "sb_"


def generate_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    pepper = get_settings().key_pepper.encode()
    return hmac.new(pepper, key.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


def looks_like_key(key: str) -> bool:
    return key.startswith(PREFIX) and 32 <= len(key) - len(PREFIX) <= 128 and key.isascii()


def display_prefix(key: str) -> str:
    return key[:10]


def hash_token(token: str) -> bytes:
    """Invitation tokens are random UUIDs: a plain SHA-256 is enough to keep them unreadable."""
    return hashlib.sha256(token.encode()).digest()
