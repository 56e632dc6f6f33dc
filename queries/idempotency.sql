-- name: IdempotencyClaim :one
-- Claims a key for a first call, committed before the call runs, or
-- replaces an expired one. The claim names its call and, by the
-- database's clock, how long the call may run. No row comes back when
-- the key is live: filed, or claimed by a call that runs.
INSERT INTO orangerail.idempotency_keys AS k (tenant_id, action, subject, key, input_digest, expires_at, claim, claimed_until)
VALUES (@tenant_id, @action, @subject, @key, @input_digest,
        -- A key does not expire while its call may run.
        greatest(@expires_at::timestamptz, now() + make_interval(secs => @lease_seconds::float8)),
        @claim, now() + make_interval(secs => @lease_seconds::float8))
ON CONFLICT (tenant_id, action, subject, key) DO UPDATE
SET input_digest = excluded.input_digest, outcome = NULL, expires_at = excluded.expires_at,
    claim = excluded.claim, claimed_until = excluded.claimed_until
WHERE k.expires_at <= now()
RETURNING k.key;

-- name: IdempotencyFind :one
-- A live key: its filed result, or (outcome NULL) the claim of the call
-- running under it, and whether that claim's time has passed.
SELECT input_digest, outcome, claim, coalesce(claimed_until <= clock_timestamp(), false)::boolean AS abandoned
FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key AND expires_at > now();

-- name: IdempotencySave :execrows
-- Files a call's result under the key its claim holds; none when the claim
-- is no longer the key's or a result is filed already.
UPDATE orangerail.idempotency_keys SET outcome = @outcome
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key
  AND claim = @claim AND outcome IS NULL;

-- name: IdempotencyAbandoned :execrows
-- Files a result in place of a claim whose time passed with none: the
-- call may have run, so the result says its outcome is unknown.
UPDATE orangerail.idempotency_keys SET outcome = @outcome
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key
  AND claim = @claim AND outcome IS NULL AND claimed_until <= clock_timestamp();

-- name: IdempotencyRelease :execrows
-- Gives back a key whose call ran nothing that a retry should not run.
DELETE FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key
  AND claim = @claim AND outcome IS NULL;

-- name: IdempotencyPrune :exec
-- Forgets the tenant's expired keys.
DELETE FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id AND expires_at <= now();
