-- name: ApprovalInsert :one
INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
VALUES (@id, @tenant_id, @action, @requested_by, @input, @input_digest, @definition_hash, @expires_at)
RETURNING *;

-- name: ApprovalGet :one
SELECT * FROM orangerail.approvals WHERE id = @id AND tenant_id = @tenant_id;

-- name: ApprovalFindOpen :one
-- The open approval for an identical call, if one exists.
SELECT * FROM orangerail.approvals
WHERE tenant_id = @tenant_id AND requested_by = @requested_by AND action = @action
  AND input_digest = @input_digest AND status IN ('pending', 'approved');

-- name: ApprovalDecide :one
-- Decides a pending, unexpired approval. No row: it was decided already or lapsed.
UPDATE orangerail.approvals
SET status = @status, decided_by = @decided_by, decided_at = now(), decision_note = @decision_note
WHERE id = @id AND tenant_id = @tenant_id AND status = 'pending' AND expires_at > now()
RETURNING *;

-- name: ApprovalConsume :one
-- The consume compare-and-swap: exactly one caller gets the row. No row:
-- someone else consumed it, it was never approved, or it lapsed.
UPDATE orangerail.approvals
SET status = 'consumed', consumed_at = now()
WHERE id = @id AND tenant_id = @tenant_id AND status = 'approved' AND expires_at > now()
RETURNING *;

-- name: ApprovalExpireLapsed :many
-- Marks open approvals past their expiry as expired.
UPDATE orangerail.approvals
SET status = 'expired'
WHERE tenant_id = @tenant_id AND status IN ('pending', 'approved') AND expires_at <= now()
RETURNING id;

-- name: ApprovalList :many
-- A tenant's approvals, newest first; status '' lists every status.
SELECT * FROM orangerail.approvals
WHERE tenant_id = @tenant_id AND (@status::text = '' OR status = @status::text)
ORDER BY created_at DESC, id
LIMIT @row_limit;
