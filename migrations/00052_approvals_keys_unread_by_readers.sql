-- A sealed input's ciphertext and wrapped data key are no reader's.
--
-- Auditors (orangerail_auditor) and the agents' SQL tool
-- (orangerail_readonly) could read every column of their tenants'
-- approvals, input_sealed and input_data_key among them. Neither opens
-- without the key ring, but a copy taken before its approval's retention
-- shredded the data key still opens after it for whoever holds the ring:
-- crypto-shredding is the data key's deletion, and a reader's copy is one
-- nobody deletes. Readers now read every column but those two; a statement
-- naming either (SELECT * among them) is refused, permission denied. The
-- digest, the kid and input_shredded_at stay readable: they tell what was
-- sealed, under which key, and when it was shredded. A column a later
-- migration adds to approvals is readable only once that migration grants
-- it: GRANT SELECT (new_column) ON orangerail.approvals TO
-- orangerail_auditor, orangerail_readonly (TestSealedInputsAreNoReadersColumns
-- holds it).

-- +goose Up
REVOKE SELECT ON orangerail.approvals FROM orangerail_auditor, orangerail_readonly;
GRANT SELECT (id, tenant_id, action, requested_by, requested_issuer, input, input_digest, input_key_id,
              definition_hash, status, created_at, expires_at, decided_by, decided_at, decision_note,
              consumed_at, input_shredded_at)
    ON orangerail.approvals TO orangerail_auditor, orangerail_readonly;

-- +goose Down
REVOKE SELECT (id, tenant_id, action, requested_by, requested_issuer, input, input_digest, input_key_id,
               definition_hash, status, created_at, expires_at, decided_by, decided_at, decision_note,
               consumed_at, input_shredded_at)
    ON orangerail.approvals FROM orangerail_auditor, orangerail_readonly;
GRANT SELECT ON orangerail.approvals TO orangerail_auditor, orangerail_readonly;
