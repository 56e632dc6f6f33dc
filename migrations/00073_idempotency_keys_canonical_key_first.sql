-- idempotency_keys_canonical_idx (00069) put issuer_key(issuer) before
-- key. The runtime reads its keys under its tenant's row policy, where a
-- comparison through a function not marked leakproof (issuer_key, which
-- only a superuser could mark so) is no index condition but a filter, run
-- after the policy: a lookup, a filing, an abandon or a release of one
-- key bounded its scan by tenant, action and subject alone, and read every
-- live key the caller held for the action — a cost that grows with the
-- caller's calls, on every keyed call.
--
-- The index now holds key before the issuer's form: the scan is bounded
-- to one key's entries (one, or one for each issuer of the subject), and
-- issuer_key filters those. It holds the same keys unique, and the
-- engine's ON CONFLICT names the same columns and expression, in
-- whatever order: it infers this index as it did the other.

-- +goose Up
DROP INDEX orangerail.idempotency_keys_canonical_idx;
CREATE UNIQUE INDEX idempotency_keys_canonical_idx
    ON orangerail.idempotency_keys (tenant_id, action, subject, key, orangerail.issuer_key(issuer));

-- +goose Down
DROP INDEX orangerail.idempotency_keys_canonical_idx;
CREATE UNIQUE INDEX idempotency_keys_canonical_idx
    ON orangerail.idempotency_keys (tenant_id, action, subject, orangerail.issuer_key(issuer), key);
