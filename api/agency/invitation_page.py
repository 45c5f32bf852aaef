"""The page an invitation email links to (GET /functions/v1/accept-invitation?token=...): a
browser opening the link sees whom it invites where and accepts it with one button, which POSTs
the same JSON that API clients send. Everything shown is escaped."""

from __future__ import annotations

from html import escape

from tenancy.clock import iso
from tenancy.invitations import ShownInvitation

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>{title}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}}
label{{display:block;margin:.5rem 0}}input{{font:inherit;width:100%}}</style></head>
<body><h1>{title}</h1>{body}</body></html>
"""

FORM = """<p>You are invited to join <strong>{sub_account}</strong> on Switchboard as
{role}, as {email}. The invitation is valid until {expires}.</p>
<form id="accept"><label>First name <input name="first_name" maxlength="100"></label>
<label>Last name <input name="last_name" maxlength="100"></label>
<button type="submit">Accept the invitation</button></form><p id="result" role="status"></p>
<noscript><p>Without JavaScript, accept it with:
<code>curl -X POST {url} -H 'Content-Type: application/json' -d '{{"token": "{token}"}}'</code>
</p></noscript>
<script>
document.getElementById("accept").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const form = new FormData(event.target), body = {{token: {token_json}}};
  for (const field of ["first_name", "last_name"]) {{
    const value = form.get(field).trim();
    if (value) body[field] = value;
  }}
  const answer = await fetch({url_json}, {{method: "POST",
    headers: {{"Content-Type": "application/json"}}, body: JSON.stringify(body)}});
  const result = await answer.json();
  document.getElementById("result").textContent = answer.ok
    ? "Accepted: you are now a member." : result.error.message;
  if (answer.ok) event.target.hidden = true;
}});
</script>
"""

GONE = {
    "used": ("Invitation already accepted", "This invitation was already accepted."),
    "expired": (
        "Invitation expired",
        "This invitation has expired. Ask whoever invited you to send a new one.",
    ),
}
UNKNOWN = (
    "Invitation not found",
    "This invitation link is not valid: it may have been replaced by a newer invitation.",
)


def _json_string(text: str) -> str:
    """A JavaScript string literal of `text`, safe inside a <script> element."""
    return (
        '"'
        + "".join(c if c.isalnum() or c in "-_.:/?=&" else f"\\u{ord(c):04x}" for c in text)
        + '"'
    )


def page(title: str, body: str) -> str:
    return PAGE.format(title=escape(title), body=body)


def invitation_page(
    shown: ShownInvitation | None, token: str, path: str, public_url: str
) -> tuple[str, int]:
    """The page and its status: 200 with the form (posting to `path`, this origin), 410 used or
    expired, 404 unknown."""
    if shown is None:
        title, text = UNKNOWN
        return page(title, f"<p>{escape(text)}</p>"), 404
    if shown.state in GONE:
        title, text = GONE[shown.state]
        return page(title, f"<p>{escape(text)}</p>"), 410
    body = FORM.format(
        sub_account=escape(shown.sub_account_name),
        role=escape(shown.role.replace("_", " ")),
        email=escape(shown.email),
        expires=escape(iso(shown.expires_at) or ""),
        url=escape(public_url + path),
        token=escape(token),
        token_json=_json_string(token),
        url_json=_json_string(path),
    )
    return page("Accept your invitation", body), 200
