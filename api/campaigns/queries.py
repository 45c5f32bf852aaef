"""The SQL of a call campaign's dispatcher (api/campaigns/dialer.py), and what it shares with
the message sender (api/campaigns/delivery.py): starting, materialising, pausing, completing."""

# The campaign, locked: one dispatcher at a time settles and places for it.
LOCK_CAMPAIGN = """
SELECT id, campaign_type, status, start_date, contact_ids, smart_list_id,
       recipients_materialised_at, agent_id, pool_id, variables, calling_window,
       max_concurrent_calls, retry
FROM campaigns WHERE id = $1
FOR UPDATE
"""

START = """
UPDATE campaigns
SET status = 'sending', started_at = COALESCE(started_at, now()), updated_at = now()
WHERE id = $1
"""

# Before it starts: waits `scheduled` for the next opening of its window (as business hours do).
DEFER = """
UPDATE campaigns
SET start_date = $2, version = version + 1, updated_at = now()
WHERE id = $1 AND status = 'scheduled'
"""

MATERIALISE = """
INSERT INTO campaign_recipients (campaign_id, contact_id)
SELECT $1, id FROM contacts
WHERE id = ANY($2::uuid[])
   OR tags && COALESCE((SELECT tags FROM smart_lists WHERE id = $3), '{}'::text[])
ON CONFLICT (sub_account_id, campaign_id, contact_id) DO NOTHING
"""

MARK_MATERIALISED = "UPDATE campaigns SET recipients_materialised_at = now() WHERE id = $1"

# Recipients whose last call ended: done when a person answered and the call completed; else
# pending again after the delay (from the call's end) when the policy retries its outcome
# ($2) and attempts are left ($3), else failed. $4 is the delay.
SETTLE = """
WITH ended AS (
    SELECT r.id, r.attempts, c.status, c.ended_reason, c.answered_by, c.ended_at, c.error
    FROM campaign_recipients AS r
    JOIN calls AS c ON c.id = r.call_ids[cardinality(r.call_ids)]
    WHERE r.campaign_id = $1 AND r.state = 'sending'
      AND c.status NOT IN ('scheduled', 'queued', 'ringing', 'in_progress')
    FOR UPDATE OF r
), decided AS (
    SELECT id, ended_reason, ended_at, error,
           CASE WHEN status = 'completed' AND answered_by = 'human'
                     AND ended_reason IS DISTINCT FROM 'voicemail' THEN 'sent'
                WHEN ended_reason = ANY($2::text[]) AND attempts < $3 THEN 'pending'
                ELSE 'failed' END AS state,
           status
    FROM ended
)
UPDATE campaign_recipients AS r
SET state = d.state, outcome = d.ended_reason,
    error = CASE WHEN d.state = 'sent' THEN NULL
                 ELSE COALESCE(d.error, 'call ' || d.status) END,
    next_attempt_at = CASE WHEN d.state = 'pending'
                           THEN COALESCE(d.ended_at, now()) + $4::interval END,
    sent_at = CASE WHEN d.state = 'sent' THEN d.ended_at END
FROM decided AS d
WHERE r.id = d.id
"""

# Recipients on a call (their call not settled yet): the campaign's calls in progress.
COUNT_ON_THE_LINE = """
SELECT count(*) FROM campaign_recipients WHERE campaign_id = $1 AND state = 'sending'
"""

# Every call of the sub-account that holds or waits for a place (its plan's limit).
COUNT_OPEN_CALLS = "SELECT count(*) FROM calls WHERE status IN ('queued', 'ringing', 'in_progress')"

# The next recipients to call: never called, or their retry is due; oldest turn first.
CLAIM_DUE = """
SELECT r.id, r.contact_id FROM campaign_recipients AS r
WHERE r.campaign_id = $1 AND r.state = 'pending'
  AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
ORDER BY r.next_attempt_at NULLS FIRST, r.created_at, r.id
LIMIT $2
FOR UPDATE SKIP LOCKED
"""

# In the transaction that writes the call: the attempt and its call, or neither.
MARK_CALLED = """
UPDATE campaign_recipients
SET state = 'sending', attempts = attempts + 1, call_ids = call_ids || $2::uuid,
    claimed_at = now(), next_attempt_at = NULL, error = NULL
WHERE id = $1
"""

MARK_SKIPPED = """
UPDATE campaign_recipients SET state = 'skipped', error = $2, claimed_at = now()
WHERE id = $1
"""

SKIP_PENDING = """
UPDATE campaign_recipients SET state = 'skipped', error = $2, next_attempt_at = NULL
WHERE campaign_id = $1 AND state = 'pending'
"""

PAUSE = """
UPDATE campaigns SET status = 'paused', paused_reason = $2, updated_at = now()
WHERE id = $1 AND status = 'sending'
"""

# When the next recipient still to call may be called (now for a first attempt); null when
# none is left.
NEXT_ATTEMPT = """
SELECT min(COALESCE(next_attempt_at, now())) FROM campaign_recipients
WHERE campaign_id = $1 AND state = 'pending'
"""

COMPLETE = """
UPDATE campaigns SET status = 'completed', completed_at = now(), updated_at = now()
WHERE id = $1 AND status = 'sending'
  AND NOT EXISTS (SELECT 1 FROM campaign_recipients
                  WHERE campaign_id = $1 AND state IN ('pending', 'sending'))
RETURNING id
"""
