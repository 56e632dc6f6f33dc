-- name: IdempotencyClaim :one
-- Claims a key for a first call (its result filed by IdempotencySave in
-- the same transaction), or replaces an expired one. No row
-- comes back when a live result is filed under the key already: a
-- concurrent first call's insert makes this wait for it to commit or roll
-- back.
INSERT INTO orangerail.idempotency_keys AS k (tenant_id, action, subject, key, input_digest, expires_at)
VALUES (@tenant_id, @action, @subject, @key, @input_digest, @expires_at)
ON CONFLICT (tenant_id, action, subject, key) DO UPDATE
SET input_digest = excluded.input_digest, outcome = NULL, expires_at = excluded.expires_at
WHERE k.expires_at <= now()
RETURNING k.key;

-- name: IdempotencyFind :one
-- The live result filed under a key.
SELECT input_digest, outcome FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key AND expires_at > now() AND outcome IS NOT NULL;

-- name: IdempotencySave :exec
-- Files the first call's result under the key it claimed.
UPDATE orangerail.idempotency_keys SET outcome = @outcome
WHERE tenant_id = @tenant_id
  AND action = @action AND subject = @subject AND key = @key;

-- name: IdempotencyPrune :exec
-- Forgets the tenant's expired keys.
DELETE FROM orangerail.idempotency_keys
WHERE tenant_id = @tenant_id AND expires_at <= now();
