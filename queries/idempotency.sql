-- name: IdempotencyClaim :one
-- Claims a key for a first call, committed before the call runs, or
-- replaces an expired one whose outcome is filed. The claim names its call
-- and, by the database's clock, how long the call may take. No row comes
-- back when the key is live (filed, unexpired) or claimed: a claim with no
-- outcome never expires, so that its retries learn the call may have run.
-- A key is one of each canonical issuer (idempotency_keys_canonical_idx,
-- 00069): one filed under another spelling of the caller's issuer is this
-- one, and so in every statement below.
INSERT INTO orangerail.idempotency_keys AS k (tenant_id, action, subject, issuer, key, input_digest, expires_at, claim, claimed_until, correlation_id)
VALUES (@tenant_id, @action, @subject, @issuer, @key, @input_digest,
        -- Set again, ttl ahead, with the outcome.
        now() + make_interval(secs => @lease_seconds::float8),
        @claim, now() + make_interval(secs => @lease_seconds::float8), @correlation_id)
ON CONFLICT (tenant_id, action, subject, orangerail.issuer_key(issuer), key) DO UPDATE
SET input_digest = excluded.input_digest, outcome = NULL, expires_at = excluded.expires_at,
    claim = excluded.claim, claimed_until = excluded.claimed_until, correlation_id = excluded.correlation_id
WHERE k.expires_at <= now() AND k.outcome IS NOT NULL
RETURNING k.key;

-- name: IdempotencyFind :one
-- A live key: its filed result, unexpired, or (outcome NULL) the claim of
-- the call running under it, the call's correlation id, and whether the
-- claim's time is over.
SELECT input_digest, outcome, claim, correlation_id,
       coalesce(claimed_until <= clock_timestamp(), false)::boolean AS abandoned
FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND orangerail.issuer_key(issuer) = orangerail.issuer_key(@issuer) AND key = @key AND (expires_at > now() OR outcome IS NULL);

-- name: IdempotencySave :execrows
-- Files a call's result under the key its claim holds, kept ttl from now;
-- none when the claim is no longer the key's or a result is filed already.
UPDATE orangerail.idempotency_keys
SET outcome = @outcome, expires_at = now() + make_interval(secs => @ttl_seconds::float8)
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND orangerail.issuer_key(issuer) = orangerail.issuer_key(@issuer) AND key = @key
  AND claim = @claim AND outcome IS NULL;

-- name: IdempotencyAbandoned :execrows
-- Files a result in place of a claim whose time is over with none, kept
-- ttl from now: the call may have run, so the result says its outcome is
-- unknown.
UPDATE orangerail.idempotency_keys
SET outcome = @outcome, expires_at = now() + make_interval(secs => @ttl_seconds::float8)
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND orangerail.issuer_key(issuer) = orangerail.issuer_key(@issuer) AND key = @key
  AND claim = @claim AND outcome IS NULL AND claimed_until <= clock_timestamp();

-- name: IdempotencyRelease :execrows
-- Gives back a key whose call ran nothing that a retry should not run.
DELETE FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND orangerail.issuer_key(issuer) = orangerail.issuer_key(@issuer) AND key = @key
  AND claim = @claim AND outcome IS NULL;

-- name: IdempotencyPrune :exec
-- Forgets the tenant's expired keys; a claim with no outcome is kept.
DELETE FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id AND expires_at <= now() AND outcome IS NOT NULL;
