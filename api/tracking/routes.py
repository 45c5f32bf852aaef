"""Tracking links in campaign email, served without a key: open pixel, click, unsubscribe.

Each link carries a signed token (api/tracking/tokens.py): a forged or altered one is 404 and
changes nothing. GET on the unsubscribe link unsubscribes (a link in an email is all most readers
have; source `unsubscribe_link`); POST does the same for RFC 8058 one-click clients, which
act on the List-Unsubscribe header (source `campaign_unsubscribe_header`).
"""

from __future__ import annotations

import base64

from quart import Blueprint, Response, request
from quart_schema import hide

from api.auth import db_pool
from api.campaigns.content import location as link_location
from api.tracking import service
from api.tracking.tokens import Tracked, verify
from tenancy.errors import APIError
from tenancy.scope import TenantScope

blueprint = Blueprint("tracking", __name__, url_prefix="/track")

PIXEL = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
NO_STORE = {"Cache-Control": "no-store, no-cache, must-revalidate, private"}
UNSUBSCRIBED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Unsubscribed</title></head>
<body><p>You are unsubscribed and will receive no further campaign email from this sender.</p>
</body></html>
"""


async def _scope(tracked: Tracked) -> TenantScope | None:
    return await TenantScope.of_active_sub_account(db_pool(), tracked.sub_account_id)


def _unknown() -> APIError:
    return APIError(404, "not_found", "link not found")


@blueprint.get("/open/<token>")
@hide
async def open_pixel(token: str) -> Response:
    tracked = verify("open", token)
    if tracked is None:
        raise _unknown()
    await service.record_open(await _scope(tracked), tracked.recipient_id)
    return Response(PIXEL, status=200, content_type="image/gif", headers=NO_STORE)


@blueprint.get("/click/<token>")
@hide
async def click(token: str) -> Response:
    tracked = verify("click", token)
    # A link that cannot be followed (signed before links were checked when a campaign is
    # written: a control character, a bad port, host or IPv6 literal) is refused before the
    # click is counted.
    location = None if tracked is None else link_location(tracked.url)
    if tracked is None or location is None:
        raise _unknown()
    await service.record_click(await _scope(tracked), tracked.recipient_id)
    return Response("", status=302, headers={"Location": location, **NO_STORE})


@blueprint.route("/unsubscribe/<token>", methods=["GET", "POST"])
@hide
async def unsubscribe(token: str) -> Response:
    tracked = verify("unsubscribe", token)
    if tracked is None:
        raise _unknown()
    source = "campaign_unsubscribe_header" if request.method == "POST" else "unsubscribe_link"
    await service.record_unsubscribe(await _scope(tracked), tracked.recipient_id, source)
    return Response(
        UNSUBSCRIBED_PAGE, status=200, content_type="text/html; charset=utf-8", headers=NO_STORE
    )
