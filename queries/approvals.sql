-- name: ApprovalStage :one
-- Inserts a pending approval and appends its staged record (entry); or,
-- when an identical call's approval is open, returns it and stages
-- nothing.
-- input_key_id is the kid of the key that made the digest (and wrapped a
-- sealed input's data key); NULL: the legacy key. A sealed input comes as
-- input_sealed and input_data_key, input NULL.
SELECT * FROM orangerail.approval_stage(@id, @action, @requested_by, sqlc.narg(input)::json, @input_digest, sqlc.narg(input_key_id)::text,
    sqlc.narg(input_sealed)::bytea, sqlc.narg(input_data_key)::bytea, @definition_hash, @expires_at, @entry);

-- name: ApprovalGet :one
SELECT * FROM orangerail.approvals WHERE id = @id AND tenant_id = @tenant_id;

-- name: ApprovalDecide :one
-- Decides a pending, unexpired approval and appends the decision's record
-- (entry). No row: it was decided already or lapsed.
SELECT * FROM orangerail.approval_decide(@id, @status, @decided_by, sqlc.narg(decision_note), @entry);

-- name: ApprovalConsume :one
-- The consume compare-and-swap: exactly one caller gets the row. No row:
-- someone else consumed it, it was never approved, or it lapsed. decided:
-- whether the chain holds the approval's approved record, asked in the
-- same statement, after the consume. The question names the approval by
-- the statement's parameters, not by the consumed row: asked of the row,
-- Postgres plans it as a hash of every approved record of the tenant (a
-- set-returning function is estimated at 1000 rows), a scan of the chain
-- per consume; asked of the parameters, it is one probe of
-- audit_approval_idx.
SELECT c.*, EXISTS (
    SELECT FROM orangerail.audit a
    WHERE a.tenant_id = @tenant_id AND a.approval_id = @id AND a.phase = 'approved'
)::bool AS decided
FROM orangerail.approval_consume(@id) AS c;

-- name: ApprovalLapsed :many
-- The first row_limit of the tenant's open approvals past their expiry,
-- the longest lapsed first: in the order of approvals_open_expiry_idx, so
-- that a batch of a long backlog reads its rows, not the whole backlog;
-- each with whether the development identity staged it (its staged
-- record's dev_mode, as ApprovalStagedDevMode reads it).
SELECT a.id, a.action,
       coalesce((SELECT bool_or(x.dev_mode) FROM orangerail.audit x
                 WHERE x.tenant_id = a.tenant_id AND x.approval_id = a.id AND x.phase = 'staged'), false)::bool AS dev_mode
FROM orangerail.approvals a
WHERE a.tenant_id = @tenant_id AND a.status IN ('pending', 'approved') AND a.expires_at <= now()
ORDER BY a.expires_at, a.id
LIMIT @row_limit;

-- name: ApprovalStagedDevMode :one
-- Whether the approval was staged by the development identity: its staged
-- record says so (audit_approval_idx).
SELECT coalesce(bool_or(dev_mode), false)::bool AS dev_mode FROM orangerail.audit
WHERE tenant_id = @tenant_id AND approval_id = @approval_id::uuid AND phase = 'staged';

-- name: ApprovalExpire :one
-- Expires one lapsed approval and appends its expired record (entry). No
-- row: it was expired, decided or consumed meanwhile.
SELECT * FROM orangerail.approval_expire(@id, @entry);

-- name: ApprovalList :many
-- A tenant's approvals, newest first; status '' lists every status.
SELECT * FROM orangerail.approvals
WHERE tenant_id = @tenant_id AND (@status::text = '' OR status = @status::text)
ORDER BY created_at DESC, id
LIMIT @row_limit;

-- name: ApprovalPage :many
-- One page of a tenant's approvals, newest first, of the given actions:
-- after the (created_at, id) of the previous page's last row, when given.
-- An empty status, action or requested_by selects every one.
SELECT * FROM orangerail.approvals
WHERE tenant_id = @tenant_id AND action = ANY(@actions::text[])
  AND (@status::text = '' OR status = @status::text)
  AND (@action::text = '' OR action = @action::text)
  AND (@requested_by::text = '' OR requested_by = @requested_by::text)
  AND (sqlc.narg(after_created_at)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: ApprovalSweepLock :one
-- Takes the tenant's sweep lock until the transaction ends, if no other
-- transaction holds it: one replica sweeps a tenant at a time, and the
-- others pass on without waiting. It is a row lock no auditor may take
-- (migration 00065), where an advisory lock any login may hold was.
SELECT orangerail.coordination_lock(@tenant_id::text, 'approval sweep', false)::bool AS locked;

-- name: ApprovalShredInputs :one
-- Deletes the data keys of at most row_limit of the tenant's sealed inputs
-- whose approvals ended at or before ended_before; returns how many.
SELECT orangerail.approval_shred_inputs(@ended_before, @row_limit)::bigint AS shredded;

-- name: ApprovalsPending :one
-- How many approvals of every tenant wait for a person, and since when the
-- oldest has (now when none does), with the database's clock.
SELECT pending::bigint AS pending, coalesce(oldest, now())::timestamptz AS oldest, now()::timestamptz AS now
FROM orangerail.approvals_pending();

-- name: ApprovalRecentlySettled :many
-- A tenant's approvals of the given actions that are no longer pending,
-- the most recently settled first (approval_settled_at: consumed, lapsed,
-- or else decided), served by approvals_settled_idx.
SELECT * FROM orangerail.approvals
WHERE tenant_id = @tenant_id AND status <> 'pending' AND action = ANY(@actions::text[])
ORDER BY orangerail.approval_settled_at(status, decided_at, consumed_at, expires_at) DESC, id
LIMIT @row_limit;
