"""Contact rules: create-or-match, read, list, update, delete, and their events (contact.created,
contact.updated, contact.deleted).

Email and phone are unique per sub-account by index, not by a check in Python: a create that
loses a race to an identical one finds the winner and updates it, and an update that would give
a contact an address or number another contact holds is refused with 409.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import phonenumbers

from api import events
from api.companies.service import company_exists
from api.contacts.schemas import Contact, ContactFields, UpdateContactRequest
from api.custom_fields.service import checked_values
from api.tags.schemas import ZERO_WIDTH_CHARACTERS
from api.types import normalise_email, parse_uuid
from tenancy.db import fetch_one_or_404, where_clause
from tenancy.errors import APIError, invalid, not_found, refuse
from tenancy.scope import TenantScope
from tenancy.tables.contacts import PHONE_BIGRAMS, TEXT_BIGRAMS

DEFAULT_SOURCE = "inbound_webhook"
E164 = re.compile(r"^\+[1-9]\d{1,14}$")
MAX_STATUS = 100
MAX_TAG = 100
# A lost insert race re-matches; a contact deleted in between is matched again, a few times.
MATCH_ATTEMPTS = 3

# Columns go by name, never by position: what a contact shows is its response model's fields,
# what a create or an update writes is STORED, and the statements below are made from them.
# A new column is added to the table (tenancy/tables/contacts.py and a migration), to the models
# (api/contacts/schemas.py) and, if the service writes it, to STORED and the change rules.
SHOWN = tuple(Contact.model_fields)
STORED = (
    "name",
    "first_name",
    "last_name",
    "email",
    "phone",
    "address",
    "tags",
    "lead_source",
    "custom_field_values",
    "company_id",
    "assigned_user_id",
    "status",
)
CONTACT_COLUMNS = ", ".join(SHOWN)

SELECT_CONTACT = f"SELECT {CONTACT_COLUMNS} FROM contacts WHERE id = $1"

SELECT_CONTACT_FOR_UPDATE = SELECT_CONTACT + " FOR UPDATE"

# Email first, then phone.
SELECT_MATCH_FOR_UPDATE = f"""
SELECT {CONTACT_COLUMNS} FROM contacts
WHERE email = $1 OR phone = $2
ORDER BY (email = $1) IS TRUE DESC
LIMIT 1
FOR UPDATE
"""

SELECT_CONTACTS_PAGE = f"""
SELECT {CONTACT_COLUMNS} FROM contacts
ORDER BY created_at DESC, id DESC
LIMIT $1 OFFSET $2
"""

COUNT_CONTACTS = "SELECT count(*) FROM contacts"

# The search (CONTRACT 7): fixed fragments joined by tenancy.db.where_clause. `q` is a LIKE
# pattern with its wildcards escaped; the trigram indexes of name, email and phone (migration
# t0005, docs/decisions.md) serve it. Email is stored lowercased, so its unique index serves
# the exact match; tags use their GIN index through @>.
TEXT_MATCH = "(name ILIKE $? OR email LIKE $?)"
TEXT_OR_PHONE_MATCH = "(name ILIKE $? OR email LIKE $? OR phone LIKE $?)"
# A `q` of 2 characters has no trigram: a contact that holds it holds it as one of the
# 2-character pieces the bigram indexes keep (tenant t0010), which find the candidates; the LIKE
# conditions stay, as the match itself.
SHORT_TEXT_MATCH = f"({TEXT_BIGRAMS} @> ARRAY[$?]::text[] AND {TEXT_MATCH})"
SHORT_TEXT_OR_PHONE_MATCH = (
    f"(({TEXT_BIGRAMS} @> ARRAY[$?]::text[] OR {PHONE_BIGRAMS} @> "
    f"ARRAY[$?]::text[]) AND {TEXT_OR_PHONE_MATCH})"
)
EMAIL_MATCH = "email = $?"
PHONE_MATCH = "phone = $?"
TAGS_MATCH = "tags @> $?::text[]"

SEARCH_PAGE = f"""
SELECT {CONTACT_COLUMNS} FROM contacts
{{where}}
ORDER BY created_at DESC, id DESC
LIMIT ${{limit}} OFFSET ${{offset}}
"""

SEARCH_COUNT = "SELECT count(*) FROM contacts {where}"

FORCE_CUSTOM_PLAN = "SET LOCAL plan_cache_mode = force_custom_plan"
# The planner prices ILIKE on every row far below its real cost (50 ms at 100,000 contacts
# against 2 ms through the trigram indexes) and, with fresh statistics, picks the scan.
INDEXES_ONLY = FORCE_CUSTOM_PLAN + "; SET LOCAL enable_seqscan = off"
# A LIKE pattern gives pg_trgm something to look up from 3 characters on.
TRIGRAM_MINIMUM = 3

# A `q` written as a phone number: digits and the punctuation people write numbers with.
PHONE_LIKE = re.compile(r"^[0-9+\-.() ]+$")

INSERT_CONTACT = f"""
INSERT INTO contacts ({", ".join(STORED)})
VALUES ({", ".join(f"${index}" for index, _ in enumerate(STORED, start=1))})
ON CONFLICT DO NOTHING
RETURNING id
"""

UPDATE_CONTACT = f"""
UPDATE contacts
SET {", ".join(f"{name} = ${index}" for index, name in enumerate(STORED, start=2))},
    updated_at = now()
WHERE id = $1
RETURNING {CONTACT_COLUMNS}
"""

DELETE_CONTACT = "DELETE FROM contacts WHERE id = $1 RETURNING id"

# NO ACTION foreign keys raise the first, ON DELETE RESTRICT ones the second (SQLSTATE 23001).
REFERENCED = (asyncpg.ForeignKeyViolationError, asyncpg.RestrictViolationError)

IS_ACTIVE_MEMBER = """
SELECT EXISTS (SELECT 1 FROM control.memberships
               WHERE sub_account_id = $1 AND user_id = $2 AND is_active)
"""

# The request fields PATCH takes (`source` is stored as lead_source).
UPDATABLE = tuple(UpdateContactRequest.model_fields)


# --- shapes -------------------------------------------------------------------------------------


def contact_out(row: asyncpg.Record | dict[str, Any]) -> dict[str, Any]:
    """The contact as GET /contacts/{id} shows it: its model's fields, by name."""
    shown = {name: row[name] for name in SHOWN}
    shown["tags"] = list(shown["tags"])
    return shown


# A caller or a texter by number (api/calls/inbound.py, api/conversations/inbound.py): a new
# contact, or the one that has the number, row-locked as an upsert would leave it. Two steps, as
# a view has no xmax to tell an upsert's insert from its update.
INSERT_BY_PHONE = """
INSERT INTO contacts (name, phone, lead_source) VALUES ($1, $1, $2)
ON CONFLICT (sub_account_id, phone) DO NOTHING
RETURNING id
"""
LOCK_BY_PHONE = "SELECT id FROM contacts WHERE phone = $1 FOR NO KEY UPDATE"


async def contact_by_phone(
    conn: asyncpg.Connection, phone: str, lead_source: str
) -> tuple[uuid.UUID, bool]:
    """The contact whose number is `phone`, and whether it was inserted here (named by its
    number, from `lead_source`) because none had it."""
    while True:
        inserted = await conn.fetchval(INSERT_BY_PHONE, phone, lead_source)
        if inserted is not None:
            return inserted, True
        found = await conn.fetchval(LOCK_BY_PHONE, phone)
        if found is not None:  # else deleted since the insert met it: insert again
            return found, False


async def emit_created(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, contact_id: uuid.UUID
) -> None:
    """contact.created for a contact inserted in this transaction (by any path)."""
    row = await conn.fetchrow(SELECT_CONTACT, contact_id)
    await events.emit(
        conn,
        "contact.created",
        {"sub_account_id": str(sub_account_id), "contact": contact_out(row)},
    )


async def emit_tags_changed(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    row: asyncpg.Record,
    added: list[str],
    removed: list[str],
) -> None:
    await events.emit(
        conn,
        "contact.updated",
        {
            "sub_account_id": str(sub_account_id),
            "contact": contact_out(row),
            "changes": {"tags": {"added": added, "removed": removed}},
        },
    )


# --- normalisation ------------------------------------------------------------------------------


def valid_phone(value: str) -> str | None:
    """The number if it is E.164 and a real number by `phonenumbers`; else None (spaces around
    it are forgiven, control characters are not)."""
    value = value.strip(" ")
    if not E164.fullmatch(value):
        return None
    try:
        parsed = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(parsed):
        return None
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


ZERO_WIDTH = dict.fromkeys(map(ord, ZERO_WIDTH_CHARACTERS))


def normalise_tag(value: str) -> str:
    """One tag as it is stored and matched (CONTRACT 11): NFKC, without zero-width characters,
    trimmed, lowercased. The final NFC keeps it stable when normalised again (a few Greek
    letters with combining marks compose only once lowered), so look-alikes are one tag."""
    text = unicodedata.normalize("NFKC", value).translate(ZERO_WIDTH).strip().lower()
    return unicodedata.normalize("NFC", text)


def normalise_tags(values: list[str]) -> list[str]:
    """Each normalised (normalise_tag), empty ones dropped, de-duplicated in first-seen order."""
    tags = list(dict.fromkeys(tag for tag in map(normalise_tag, values) if tag))
    too_long = [tag for tag in tags if len(tag) > MAX_TAG]
    if too_long:
        raise refuse([invalid("tags", f"a tag has at most {MAX_TAG} characters", "too_long")])
    return tags


def derived_name(
    first_name: str | None, last_name: str | None, email: str | None, phone: str | None
) -> str | None:
    full = " ".join(part for part in (first_name, last_name) if part).strip()
    return full or email or phone


def _text(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def _status(value: Any) -> str:
    status = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(status) <= MAX_STATUS:
        raise refuse(
            [
                invalid(
                    "status", f"status is 1 to {MAX_STATUS} characters, not empty", "string_length"
                )
            ]
        )
    return status


def _required_email_or_phone() -> APIError:
    return APIError(
        400,
        "contacts_email_or_phone_required",
        "a contact needs a valid email address or an E.164 phone number",
    )


@dataclass
class Changes:
    """What a create or update writes: plain columns, custom field values, references."""

    columns: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] | None = None
    rebuild_name: bool = False


def _extended(data: ContactFields, changes: Changes) -> None:
    """The extended attributes: the same rules on create and on update."""
    sent = data.model_fields_set
    if "custom_field_values" in sent:
        if data.custom_field_values is None:
            raise refuse([invalid("custom_field_values", "must be an object", "dict_type")])
        changes.values = data.custom_field_values
    for key in ("company_id", "assigned_user_id"):
        if key in sent:
            value = getattr(data, key)
            changes.columns[key] = None if value is None else parse_uuid(value, key)
    if "status" in sent:
        changes.columns["status"] = _status(data.status)


def create_changes(data: ContactFields) -> Changes:
    """POST /contacts: a bad email or phone is dropped, null means absent, tags are ignored."""
    changes = Changes()
    email = normalise_email(data.email) if data.email else None
    phone = valid_phone(data.phone) if data.phone else None
    if email is None and phone is None:
        raise _required_email_or_phone()
    for key, value in (("email", email), ("phone", phone)):
        if value is not None:
            changes.columns[key] = value
    for key in ("first_name", "last_name", "address"):
        if _text(getattr(data, key)) is not None:
            changes.columns[key] = _text(getattr(data, key))
    if _text(data.name) is not None:
        changes.columns["name"] = _text(data.name)
    else:
        changes.rebuild_name = "first_name" in changes.columns or "last_name" in changes.columns
    if _text(data.source) is not None:
        changes.columns["lead_source"] = _text(data.source)
    _extended(data, changes)
    return changes


def update_changes(data: UpdateContactRequest) -> Changes:
    """PATCH /contacts/{id}: only the fields present, a bad email or phone is 400."""
    sent = data.model_fields_set
    if not any(key in sent for key in UPDATABLE):
        raise APIError(400, "nothing_to_update", "the body names no field to update")
    changes = Changes()
    details: list[dict[str, str]] = []
    if "email" in sent:
        email = None if data.email is None else normalise_email(data.email)
        if data.email is not None and email is None:
            details.append(invalid("email", "not a valid email address", "email"))
        changes.columns["email"] = email
    if "phone" in sent:
        phone = None if data.phone is None else valid_phone(data.phone)
        if data.phone is not None and phone is None:
            details.append(
                invalid("phone", "must be a valid E.164 number like +14155550100", "phone")
            )
        changes.columns["phone"] = phone
    if "tags" in sent:
        if data.tags is None:
            details.append(invalid("tags", "must be an array of strings", "list_type"))
        else:
            changes.columns["tags"] = normalise_tags(data.tags)
    if "source" in sent:
        source = _text(data.source)
        if source is None:
            details.append(invalid("source", "must be a non-empty string", "string_type"))
        changes.columns["lead_source"] = source
    if details:
        raise refuse(details)
    for key in ("first_name", "last_name", "address"):
        if key in sent:
            changes.columns[key] = _text(getattr(data, key))
    if "name" in sent and _text(data.name) is not None:
        changes.columns["name"] = _text(data.name)
    else:
        changes.rebuild_name = "name" in sent or "first_name" in sent or "last_name" in sent
    _extended(data, changes)
    return changes


# --- references ---------------------------------------------------------------------------------


async def _checked_references(
    conn: asyncpg.Connection, sub_account_id: uuid.UUID, changes: Changes
) -> tuple[dict[str, Any], list[str]]:
    """400 unless company, assignee and custom field values are all valid; the values to write."""
    details: list[dict[str, str]] = []
    company_id = changes.columns.get("company_id")
    if company_id is not None and not await company_exists(conn, company_id):
        details.append(
            invalid("company_id", "no company of this sub-account has this id", "unknown_company")
        )
    user_id = changes.columns.get("assigned_user_id")
    if user_id is not None and not await conn.fetchval(IS_ACTIVE_MEMBER, sub_account_id, user_id):
        details.append(
            invalid("assigned_user_id", "not an active member of this sub-account", "unknown_user")
        )
    to_set: dict[str, Any] = {}
    to_clear: list[str] = []
    if changes.values:
        try:
            to_set, to_clear = await checked_values(conn, changes.values)
        except APIError as exc:
            details.extend(exc.details or [])
    if details:
        raise refuse(details)
    return to_set, to_clear


def _conflict(exc: asyncpg.UniqueViolationError) -> APIError:
    if exc.constraint_name == "uq_contacts_email":
        return APIError(
            409, "contact_email_conflict", "another contact already has this email address"
        )
    if exc.constraint_name == "uq_contacts_phone":
        return APIError(
            409, "contact_phone_conflict", "another contact already has this phone number"
        )
    raise exc


def _merged(
    old: asyncpg.Record, changes: Changes, to_set: dict[str, Any], to_clear: list[str]
) -> dict[str, Any]:
    row = dict(old)
    row.update(changes.columns)
    values = {**old["custom_field_values"], **to_set}
    for key in to_clear:
        values.pop(key, None)
    row["custom_field_values"] = values
    if changes.rebuild_name and "name" not in changes.columns:
        row["name"] = derived_name(row["first_name"], row["last_name"], row["email"], row["phone"])
    return row


async def _update(
    conn: asyncpg.Connection,
    sub_account_id: uuid.UUID,
    old: asyncpg.Record,
    changes: Changes,
    to_set: dict[str, Any],
    to_clear: list[str],
) -> None:
    row = _merged(old, changes, to_set, to_clear)
    if row["email"] is None and row["phone"] is None:
        raise _required_email_or_phone()
    tags_changed = set(row["tags"]) != set(old["tags"])
    if not tags_changed:
        row["tags"] = list(old["tags"])
    new = await conn.fetchrow(UPDATE_CONTACT, old["id"], *(row[name] for name in STORED))
    if tags_changed:
        await emit_tags_changed(
            conn,
            sub_account_id,
            new,
            [tag for tag in new["tags"] if tag not in old["tags"]],
            [tag for tag in old["tags"] if tag not in new["tags"]],
        )


# --- operations ---------------------------------------------------------------------------------


async def create_or_match(scope: TenantScope, data: ContactFields) -> tuple[bool, uuid.UUID]:
    """(created, contact_id): a new contact, or the one matched by email, then phone, updated."""
    changes = create_changes(data)
    email, phone = changes.columns.get("email"), changes.columns.get("phone")
    try:
        async with scope.transaction() as conn:
            to_set, to_clear = await _checked_references(conn, scope.sub_account_id, changes)
            for _ in range(MATCH_ATTEMPTS):
                matched = await conn.fetchrow(SELECT_MATCH_FOR_UPDATE, email, phone)
                if matched is not None:
                    # The source applies only to a contact created here.
                    changes.columns.pop("lead_source", None)
                    await _update(conn, scope.sub_account_id, matched, changes, to_set, to_clear)
                    return False, matched["id"]
                created = await conn.fetchval(INSERT_CONTACT, *_new_row(changes, to_set))
                if created is not None:
                    await emit_created(conn, scope.sub_account_id, created)
                    return True, created
    except asyncpg.UniqueViolationError as exc:
        raise _conflict(exc) from None
    raise APIError(409, "conflict", "the contact changed while it was saved; retry")


def _new_row(changes: Changes, to_set: dict[str, Any]) -> tuple[Any, ...]:
    """INSERT_CONTACT's values, by STORED's names (tags are never set on create)."""
    columns = changes.columns
    row = {name: columns.get(name) for name in STORED}
    row["name"] = columns.get("name") or derived_name(
        columns.get("first_name"),
        columns.get("last_name"),
        columns.get("email"),
        columns.get("phone"),
    )
    row["tags"] = []
    row["lead_source"] = columns.get("lead_source", DEFAULT_SOURCE)
    row["custom_field_values"] = to_set
    return tuple(row[name] for name in STORED)


async def update_contact(
    scope: TenantScope, contact_id: uuid.UUID, data: UpdateContactRequest
) -> None:
    changes = update_changes(data)
    try:
        async with scope.transaction() as conn:
            old = await fetch_one_or_404(
                conn, SELECT_CONTACT_FOR_UPDATE, contact_id, what="contact"
            )
            to_set, to_clear = await _checked_references(conn, scope.sub_account_id, changes)
            await _update(conn, scope.sub_account_id, old, changes, to_set, to_clear)
    except asyncpg.UniqueViolationError as exc:
        raise _conflict(exc) from None


async def get_contact(scope: TenantScope, contact_id: uuid.UUID) -> dict[str, Any]:
    async with scope.transaction() as conn:
        row = await fetch_one_or_404(conn, SELECT_CONTACT, contact_id, what="contact")
    return contact_out(row)


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _index_usable(conditions: list[tuple[str, Any]]) -> bool:
    """A text condition the trigram indexes serve (every pattern has 3 characters or more) or
    the bigram indexes do (a 2-character `q`)."""
    return any(
        fragment in (SHORT_TEXT_MATCH, SHORT_TEXT_OR_PHONE_MATCH)
        or (
            fragment in (TEXT_MATCH, TEXT_OR_PHONE_MATCH)
            and all(
                len(re.sub(r"\\(.)", r"\1", pattern[1:-1])) >= TRIGRAM_MINIMUM for pattern in values
            )
        )
        for fragment, values in conditions
    )


def _text_condition(q: str) -> tuple[str, Any]:
    text = q.lower()
    pattern = _like(text)
    digits = re.sub(r"[^0-9]", "", q)
    phone_like = PHONE_LIKE.fullmatch(q) and len(digits) >= 2
    if len(q) == 2:
        if phone_like:
            return SHORT_TEXT_OR_PHONE_MATCH, (text, digits, pattern, pattern, _like(digits))
        return SHORT_TEXT_MATCH, (text, pattern, pattern)
    if phone_like:
        return TEXT_OR_PHONE_MATCH, (pattern, pattern, _like(digits))
    return TEXT_MATCH, (pattern, pattern)


def search_conditions(
    q: str | None, email: str | None, phone: str | None, tags: list[str] | None
) -> list[tuple[str, Any]]:
    """The WHERE fragments of a search; a malformed email, phone or tag is 400."""
    details: list[dict[str, str]] = []
    conditions: list[tuple[str, Any]] = []
    if q is not None:
        conditions.append(_text_condition(q))
    if email is not None:
        # Exact filters take the value exactly as documented: no spaces around it.
        address = normalise_email(email) if email == email.strip() else None
        if address is None:
            details.append(invalid("email", "must be a valid email address", "email"))
        conditions.append((EMAIL_MATCH, address))
    if phone is not None:
        number = valid_phone(phone) if phone == phone.strip() else None
        if number is None:
            details.append(
                invalid("phone", "must be a valid E.164 number like +14155550100", "phone")
            )
        conditions.append((PHONE_MATCH, number))
    if tags is not None:
        wanted = [normalise_tag(tag) for tag in tags]
        if not all(0 < len(tag) <= MAX_TAG for tag in wanted):
            details.append(invalid("tag", f"a tag has 1 to {MAX_TAG} characters", "tag"))
        conditions.append((TAGS_MATCH, list(dict.fromkeys(wanted))))
    if details:
        raise refuse(details)
    return conditions


def search_statements(conditions: list[tuple[str, Any]]) -> tuple[str, str, list[Any]]:
    """(page query, count query, values): the page takes the values, then limit and offset."""
    if not conditions:
        return SELECT_CONTACTS_PAGE, COUNT_CONTACTS, []
    where, values = where_clause(conditions)
    page = SEARCH_PAGE.format(where=where, limit=len(values) + 1, offset=len(values) + 2)
    return page, SEARCH_COUNT.format(where=where), values


def plan_settings(conditions: list[tuple[str, Any]]) -> str | None:
    """What the search's transaction sets before its statements, if anything.

    asyncpg prepares statements, and after five runs PostgreSQL may keep a generic plan, made
    without the values: it cannot tell that a LIKE pattern is selective and scans every contact
    (~100 ms at 100,000) where the trigram indexes take under 1 ms."""
    if not conditions:
        return None
    return INDEXES_ONLY if _index_usable(conditions) else FORCE_CUSTOM_PLAN


async def run_search(
    conn: asyncpg.Connection, conditions: list[tuple[str, Any]], limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """The rows of one page and the filtered total, in the caller's tenant transaction."""
    page, count, values = search_statements(conditions)
    settings = plan_settings(conditions)
    if settings:
        await conn.execute(settings)
    rows = await conn.fetch(page, *values, limit, offset)
    return rows, await conn.fetchval(count, *values)


async def list_contacts(
    scope: TenantScope, conditions: list[tuple[str, Any]], limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of the contacts that meet every condition (search_conditions), newest first,
    and how many meet them."""
    async with scope.transaction() as conn:
        rows, total = await run_search(conn, conditions, limit, offset)
    return [contact_out(row) for row in rows], total


async def delete_contact(scope: TenantScope, contact_id: uuid.UUID) -> None:
    """Hard delete; notes go with it, and any record that references it blocks it (409)."""
    try:
        async with scope.transaction() as conn:
            deleted = await conn.fetchval(DELETE_CONTACT, contact_id)
            if deleted is not None:
                await events.emit(
                    conn,
                    "contact.deleted",
                    {"sub_account_id": str(scope.sub_account_id), "contact_id": deleted},
                )
    except REFERENCED:
        raise APIError(
            409,
            "contact_referenced",
            "the contact is still referenced by other records (for example "
            "invoices, calls, conversations or appointments)",
        ) from None
    if deleted is None:
        raise not_found("contact")
