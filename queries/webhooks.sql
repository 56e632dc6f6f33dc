-- name: WebhookDueTenants :many
-- The tenants with an outbox row due at now (at most row_limit).
SELECT t::text AS tenant_id FROM orangerail.webhook_outbox_due_tenants(@now::timestamptz, @row_limit::integer) t;

-- name: WebhookClaim :many
-- Leases up to row_limit of the tenant's due rows to the caller until
-- locked_until, counting the attempt. SKIP LOCKED: a row another worker is
-- claiming meanwhile is left to it.
UPDATE orangerail.webhook_outbox o
SET locked_until = @locked_until::timestamptz, attempts = o.attempts + 1
WHERE o.id IN (
    SELECT d.id FROM orangerail.webhook_outbox d
    WHERE d.tenant_id = @tenant_id AND d.state = 'queued' AND d.next_attempt_at <= @now::timestamptz
      AND (d.locked_until IS NULL OR d.locked_until <= @now::timestamptz)
    ORDER BY d.next_attempt_at, d.seq
    LIMIT @row_limit
    FOR UPDATE SKIP LOCKED)
RETURNING o.*;

-- The marks below change a row only while the caller's lease (the
-- locked_until its claim returned) still holds it: a worker whose lease
-- ran out, and whose message another worker claimed since, cannot
-- overwrite what that worker records.

-- name: WebhookDelivered :execrows
-- Every endpoint answered: the row is done.
UPDATE orangerail.webhook_outbox
SET state = 'delivered', delivered_at = @now::timestamptz, delivered_to = @delivered_to::text[],
    locked_until = NULL, last_error = NULL
WHERE id = @id AND tenant_id = @tenant_id AND locked_until = @lease::timestamptz;

-- name: WebhookRetry :execrows
-- Some endpoint failed: try again at next_attempt_at.
UPDATE orangerail.webhook_outbox
SET next_attempt_at = @next_attempt_at::timestamptz, delivered_to = @delivered_to::text[],
    locked_until = NULL, last_error = @last_error::text
WHERE id = @id AND tenant_id = @tenant_id AND locked_until = @lease::timestamptz;

-- name: WebhookFail :execrows
-- The attempts ran out. next_attempt_at becomes the last attempt's time,
-- which the retention counts from (webhook_outbox_prune): it was when the
-- attempt was due, long before it ran where the workers were behind.
UPDATE orangerail.webhook_outbox
SET state = 'failed', next_attempt_at = @now::timestamptz, delivered_to = @delivered_to::text[], locked_until = NULL, last_error = @last_error::text
WHERE id = @id AND tenant_id = @tenant_id AND locked_until = @lease::timestamptz;

-- name: WebhookRedeliver :one
-- Queues a row again, due at now, for every endpoint subscribed to its
-- event where it is delivered: owed_to NULL, the endpoints configured
-- when it was queued forgotten (migrations/00048). Never a row a worker
-- holds leased at now: clearing its lease would let a second worker claim
-- and send it while the first is still sending it (WebhookLeased tells
-- that from a row the tenant does not have).
UPDATE orangerail.webhook_outbox
SET state = 'queued', attempts = 0, next_attempt_at = @now::timestamptz, locked_until = NULL,
    delivered_to = '{}', last_error = NULL, delivered_at = NULL, owed_to = NULL
WHERE id = @id AND tenant_id = @tenant_id
  AND (locked_until IS NULL OR locked_until <= @now::timestamptz)
RETURNING *;

-- name: WebhookLeased :one
-- Whether the tenant's row is leased to a worker at now.
SELECT EXISTS (
    SELECT FROM orangerail.webhook_outbox
    WHERE id = @id AND tenant_id = @tenant_id AND locked_until > @now::timestamptz
) AS leased;

-- name: WebhookList :many
-- A tenant's outbox, newest first; state '' lists every state.
SELECT * FROM orangerail.webhook_outbox
WHERE tenant_id = @tenant_id AND (@state::text = '' OR state = @state::text)
ORDER BY seq DESC
LIMIT @row_limit;

-- name: WebhookPrune :one
-- Deletes up to row_limit finished messages (delivered, or failed) whose
-- last attempt was before @before, the oldest first, and counts them.
SELECT orangerail.webhook_outbox_prune(@before::timestamptz, @row_limit::integer)::integer AS pruned;
