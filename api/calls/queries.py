"""SQL of inbound calls (api/calls/inbound.py) and of a call's context (api/calls/context.py)."""

SELECT_HELD_NUMBER = """
SELECT id, agent_id FROM phone_numbers WHERE phone_number = $1 AND is_active
"""

# KEY SHARE on the agent: a deletion either sees this call or finds the agent in use.
SELECT_NUMBER_AND_AGENT = """
SELECT n.id, n.phone_number, n.provider, n.agent_id, a.is_active AS agent_active
FROM phone_numbers AS n LEFT JOIN agents AS a ON a.id = n.agent_id AND a.deleted_at IS NULL
WHERE n.phone_number = $1 AND n.is_active
FOR KEY SHARE OF n
"""

LOCK_AGENT = "SELECT id FROM agents WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE"

SELECT_CALL_BY_PROVIDER_ID = """
SELECT id, contact_id, status FROM calls WHERE provider = $1 AND provider_call_id = $2
"""

SELECT_QUEUED_CALL = """
SELECT id, created_at FROM calls WHERE id = $1 AND status = 'queued' FOR UPDATE
"""

MARK_CONNECTED = """
UPDATE calls SET status = 'ringing', started_at = now(), updated_at = now() WHERE id = $1
"""

# $10: the id a sandbox call_sid names (`inbound.ring_sandbox`), else a random one.
INSERT_INBOUND_CALL = """
INSERT INTO calls (id, contact_id, agent_id, phone_number_id, from_number, to_number, provider,
                   direction, status, provider_call_id, started_at)
VALUES (COALESCE($10::uuid, gen_random_uuid()), $1, $2, $3, $4, $5, $6, 'inbound', $7, $8, $9)
RETURNING id
"""

# One ring of a sandbox call_sid at a time (per sub-account): the second finds the first's call.
LOCK_CALL_SID = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

# The call a sandbox call_sid named, and whether it is still remembered (rung within $2).
SELECT_CALL_SID_CALL = """
SELECT id, contact_id, created_at > now() - $2::interval AS remembered FROM calls WHERE id = $1
"""

# --- a call's context (api/calls/context.py) --------------------------------------------------

# The call, its contact, its agent's texts and timezone, and the sub-account's name (the
# tenant's schema is the first on the search_path: current_schema() names it).
SELECT_CALL_CONTEXT = """
SELECT c.direction, c.from_number, c.to_number, c.variables,
       p.first_name, p.last_name, p.name, p.email, p.phone, p.custom_field_values,
       a.timezone, a.prompt, a.first_message,
       (SELECT s.name FROM control.sub_accounts AS s WHERE s.schema_name = current_schema())
           AS sub_account_name
FROM calls AS c
JOIN contacts AS p ON p.id = c.contact_id
JOIN agents AS a ON a.id = c.agent_id
WHERE c.id = $1
"""
