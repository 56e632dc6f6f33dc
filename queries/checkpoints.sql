-- name: CheckpointInsert :execrows
-- Stores a signed checkpoint of the transaction's tenant; 0 rows when a
-- checkpoint of that size exists already (another replica signed it).
INSERT INTO orangerail.audit_checkpoints (tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note)
VALUES (@tenant_id, @size, @root_hash, @frontier, @origin, @key_name, @key_hash, @verifier_key, @note)
ON CONFLICT (tenant_id, size) DO NOTHING;

-- name: CheckpointLatest :one
SELECT tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note, signed_at
FROM orangerail.audit_checkpoints
WHERE tenant_id = @tenant_id
ORDER BY size DESC
LIMIT 1;

-- name: CheckpointAt :one
SELECT tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note, signed_at
FROM orangerail.audit_checkpoints
WHERE tenant_id = @tenant_id AND size = @size;

-- name: CheckpointPage :many
-- A tenant's checkpoints of size above after_size, smallest first, at most
-- page_size: what audit verify checks each note of.
SELECT size, root_hash, origin, verifier_key, note
FROM orangerail.audit_checkpoints
WHERE tenant_id = @tenant_id AND size > @after_size::bigint
ORDER BY size
LIMIT @page_size::integer;

-- name: AuditLinks :many
-- The sealed records of seq after_seq + 1 to upto_seq, in seq order: seq,
-- links and entry (with_entry false: an empty entry).
SELECT seq::bigint AS seq, prev_hash::bytea AS prev_hash, hash::bytea AS hash,
       CASE WHEN @with_entry::boolean THEN entry ELSE ''::bytea END AS entry
FROM orangerail.audit
WHERE tenant_id = @tenant_id AND seq > @after_seq::bigint AND seq <= @upto_seq::bigint
ORDER BY seq;

-- name: CheckpointSignLock :exec
-- Takes the tenant's signing lock for the transaction, waiting (within the
-- lock timeout) for a replica that holds it: replicas signing at once do
-- not all read and hash the same records (the database checks each
-- checkpoint stored, so each would cost it as much again). It is a row
-- lock no auditor may take (migration 00065), where an advisory lock any
-- login may hold was.
SELECT orangerail.coordination_lock(@tenant_id::text, 'checkpoint sign', true);

-- name: StatementTimeoutMillis :one
-- The transaction's statement_timeout in milliseconds (0: none), which
-- bounds how many records one checkpoint may add.
SELECT setting::bigint AS millis FROM pg_catalog.pg_settings WHERE name = 'statement_timeout';
