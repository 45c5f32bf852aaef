"""Idempotency-Key on POST, as Stripe and the IETF httpapi draft describe it.

The first request with a key claims a row in `control.idempotency_keys` (a unique insert, so
concurrent repeats cannot both run). Its final response is stored when it answers, and for 24
hours a repeat with the same body gets that response again (with `Idempotent-Replayed: true`;
the stored body is encrypted under SWITCHBOARD_SECRETS_KEY);
a repeat with another body is 422, a repeat while the first still runs is 409. A 5xx answer is
not kept, so a failed request can be retried with the same key.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

from quart import Response, current_app, g, request

from tenancy import secrets
from tenancy.clock import utcnow
from tenancy.errors import APIError

HEADER = "Idempotency-Key"
KEY_FORMAT = re.compile(r"^[\x21-\x7e]{1,255}$")
RETENTION = timedelta(hours=24)
LEASE = timedelta(seconds=60)

CLAIM = """
INSERT INTO control.idempotency_keys (api_key_id, key, request_hash, locked_until)
VALUES ($1, $2, $3, $4)
ON CONFLICT (api_key_id, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, state = 'running',
    locked_until = EXCLUDED.locked_until, response_status = NULL,
    response_content_type = NULL, response_body = NULL, created_at = now()
WHERE control.idempotency_keys.created_at < now() - $5::interval
   OR (control.idempotency_keys.state = 'running'
       AND control.idempotency_keys.locked_until < now()
       AND control.idempotency_keys.request_hash = EXCLUDED.request_hash)
RETURNING api_key_id
"""

SELECT = """
SELECT request_hash, state, response_status, response_content_type, response_body
FROM control.idempotency_keys WHERE api_key_id = $1 AND key = $2
"""

STORE = """
UPDATE control.idempotency_keys
SET state = 'done', response_status = $3, response_content_type = $4, response_body = $5
WHERE api_key_id = $1 AND key = $2
"""

RELEASE = "DELETE FROM control.idempotency_keys WHERE api_key_id = $1 AND key = $2"


async def _request_hash() -> bytes:
    """Same method, path and JSON content (key order and spacing aside) hash the same."""
    raw: bytes = await request.get_data(as_text=False)  # type: ignore[assignment]
    try:
        body = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        body = raw
    except RecursionError:  # the same answer the body parser gives without the header
        raise APIError(400, "invalid_json", "the JSON body is nested too deeply") from None
    return hashlib.sha256(
        request.method.encode() + b" " + request.path.encode() + b"\n" + body
    ).digest()


async def begin(api_key_id: object) -> Response | None:
    """Claim the request's key, or answer for it (replay, 409, 422). None: go on and run it."""
    if request.method != "POST":
        return None
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not KEY_FORMAT.fullmatch(key):
        raise APIError(
            400,
            "invalid_idempotency_key",
            "Idempotency-Key must be 1 to 255 visible ASCII characters",
        )
    digest = await _request_hash()
    pool = current_app.config["DB_POOL"]
    claimed = await pool.fetchval(CLAIM, api_key_id, key, digest, utcnow() + LEASE, RETENTION)
    if claimed is not None:
        g.idempotency = (api_key_id, key)
        return None
    row = await pool.fetchrow(SELECT, api_key_id, key)
    if row is None:  # released between our insert and read: the client may simply retry
        raise APIError(
            409, "idempotency_key_in_progress", "a request with this Idempotency-Key is in progress"
        )
    if row["request_hash"] != digest:
        raise APIError(
            422, "idempotency_key_reused", "this Idempotency-Key was used with a different request"
        )
    if row["state"] != "done":
        raise APIError(
            409, "idempotency_key_in_progress", "a request with this Idempotency-Key is in progress"
        )
    response = Response(
        secrets.decrypt_bytes(row["response_body"]),
        status=row["response_status"],
        content_type=row["response_content_type"],
    )
    response.headers["Idempotent-Replayed"] = "true"
    return response


async def finish(response: Response) -> None:
    """Keep the first answer (release the key instead on a 5xx, so a retry runs again)."""
    claim = g.pop("idempotency", None)
    if claim is None:
        return
    pool = current_app.config["DB_POOL"]
    if response.status_code >= 500:
        await pool.execute(RELEASE, *claim)
        return
    # Encrypted: answers carry API keys, invitation tokens and webhook secrets (CONTRACT 8).
    body = secrets.encrypt_bytes(await response.get_data(as_text=False))
    await pool.execute(STORE, *claim, response.status_code, response.content_type, body)
