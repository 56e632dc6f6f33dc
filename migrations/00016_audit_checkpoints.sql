-- Signed checkpoints of each tenant's sealed audit log (internal/checkpoint):
-- the log read as an RFC 6962 Merkle tree whose leaf N-1 is the chain hash
-- of the record of seq N, its root signed in the C2SP tlog-checkpoint and
-- signed-note formats (Ed25519). Every checkpoint is kept: an auditor who
-- kept an old one asks for a consistency proof from it to a newer one.
--
-- A row holds the signed note itself (what verifiers check), the tree it
-- names (size, root), the key that signed it (name and 32-bit hash: a
-- rotated key's checkpoints stay verifiable with its public key, kept in
-- verifier_key), and the tree's frontier: the roots of its perfect
-- subtrees, left to right, concatenated, so the next checkpoint extends
-- the tree with the records sealed since instead of re-reading the chain.
-- The frontier is not signed; a wrong one yields a checkpoint no
-- consistency proof reaches, which verifiers report.
--
-- Any replica signs; (tenant_id, size) is unique, and a replica that finds
-- the size taken leaves the one there (INSERT ... ON CONFLICT DO NOTHING).
-- Checkpoints are append-only like the chain, readable by the runtime for
-- its transaction's tenant and by auditors for their granted tenants. The
-- read-only SQL tool's role does not read them: agents get no new relation
-- (proofs are served over the API and the command line).

-- +goose Up
CREATE TABLE orangerail.audit_checkpoints (
    tenant_id    text        NOT NULL REFERENCES orangerail.tenants (id),
    size         bigint      NOT NULL CHECK (size >= 1),
    root_hash    bytea       NOT NULL CHECK (octet_length(root_hash) = 32),
    frontier     bytea       NOT NULL CHECK (octet_length(frontier) % 32 = 0 AND octet_length(frontier) <= 64 * 32),
    origin       text        NOT NULL CHECK (origin <> ''),
    key_name     text        NOT NULL CHECK (key_name <> ''),
    key_hash     bigint      NOT NULL CHECK (key_hash BETWEEN 0 AND 4294967295),
    verifier_key text        NOT NULL,
    note         text        NOT NULL,
    signed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, size)
);

CREATE TRIGGER audit_checkpoints_refuse_update_delete BEFORE UPDATE OR DELETE ON orangerail.audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER audit_checkpoints_refuse_truncate BEFORE TRUNCATE ON orangerail.audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION orangerail.refuse_change();
ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_update_delete;
ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_truncate;

ALTER TABLE orangerail.audit_checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.audit_checkpoints FORCE ROW LEVEL SECURITY;
CREATE POLICY audit_checkpoints_tenant ON orangerail.audit_checkpoints TO orangerail_runtime, CURRENT_USER
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY audit_checkpoints_auditor ON orangerail.audit_checkpoints FOR SELECT TO orangerail_auditor
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));

REVOKE ALL ON orangerail.audit_checkpoints FROM PUBLIC;
GRANT SELECT, INSERT ON orangerail.audit_checkpoints TO orangerail_runtime;
GRANT SELECT ON orangerail.audit_checkpoints TO orangerail_auditor;

-- +goose Down
DROP TABLE orangerail.audit_checkpoints;
