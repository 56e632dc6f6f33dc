-- The first result of an idempotent action's call, filed under the tenant,
-- the action, the caller's subject and the key the caller sent, so that a
-- retry with the same key and input gets that result back instead of
-- running the action again. input_digest is the digest of the canonical
-- input (the key taken out): a different input under the same key is
-- refused. A key is kept until expires_at (limits.idempotency_ttl); an
-- expired row may be replaced by a new call, and is pruned.

-- +goose Up
CREATE TABLE orangerail.idempotency_keys (
    tenant_id    text        NOT NULL,
    action       text        NOT NULL,
    subject      text        NOT NULL,
    key          text        NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
    input_digest bytea       NOT NULL,
    outcome      bytea,      -- JSON, byte for byte as first answered; NULL only inside the first call's transaction
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, action, subject, key)
);
CREATE INDEX idempotency_keys_expiry_idx ON orangerail.idempotency_keys (tenant_id, expires_at);

ALTER TABLE orangerail.idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY idempotency_keys_tenant ON orangerail.idempotency_keys TO orangerail_runtime
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));

REVOKE ALL ON orangerail.idempotency_keys FROM PUBLIC;
-- The runtime claims a key, files its result, replaces an expired one and
-- prunes: it never rewrites which key a row names.
GRANT SELECT, INSERT, DELETE ON orangerail.idempotency_keys TO orangerail_runtime;
GRANT UPDATE (input_digest, outcome, expires_at) ON orangerail.idempotency_keys TO orangerail_runtime;

-- +goose Down
DROP TABLE orangerail.idempotency_keys;
