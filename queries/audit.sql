-- name: AuditAppend :exec
-- Appends one canonical entry, unsealed, to the chain of the transaction's
-- tenant.
SELECT orangerail.audit_append(@entry::bytea);

-- name: AuditEntryExists :one
-- Whether the transaction's tenant's chain holds this very entry, sealed
-- or not: a record once committed is never removed, so it is the witness
-- that the transaction which appended it committed.
SELECT EXISTS (
    SELECT FROM orangerail.audit a
    WHERE a.tenant_id = current_setting('orangerail.tenant_id', true)
      AND a.correlation_id = @correlation_id::text AND a.entry = @entry::bytea
) AS present;

-- name: AuditSeal :one
-- Seals up to row_limit of the transaction's tenant's committed unsealed
-- records; 0 when there were none or (unless wait) another sealer holds
-- the tenant.
SELECT orangerail.audit_seal(@row_limit::integer, @wait::boolean)::integer AS sealed;

-- name: AuditUnsealedTenants :many
-- The tenants with an unsealed record, oldest record first, and how long
-- that record has waited, by the database's clock.
SELECT u.tenant_id::text AS tenant_id, u.oldest::timestamptz AS oldest,
       greatest(extract(epoch FROM now() - u.oldest), 0)::float8 AS waited_seconds
FROM orangerail.audit_unsealed_tenants(@row_limit::integer) AS u;

-- name: AuditUnsealed :many
-- A tenant's records unsealed longer than bound_seconds: findings, the
-- first row_limit of them, each with the count of all (total). A column
-- emptied where a superuser dropped its constraint reads as empty, a NULL
-- time as when the record was written: the record is listed whole, and
-- once sealed is a column_mismatch.
SELECT coalesce(u.correlation_id, '')::text AS correlation_id, coalesce(u.phase, '')::text AS phase, coalesce(u.action, '')::text AS action,
       coalesce(u.at, now() - u.unsealed_for)::timestamptz AS at, extract(epoch FROM u.unsealed_for)::float8 AS unsealed_seconds,
       count(*) OVER ()::bigint AS total
FROM orangerail.audit_unsealed(@tenant_id::text, make_interval(secs => @bound_seconds::float8)) AS u
LIMIT @row_limit::integer;

-- name: AuditHead :one
-- A seq emptied where the owner dropped its constraint reads as 0 with
-- seq_missing: a head that names no record, which the verifier reports.
SELECT coalesce(seq, 0)::bigint AS seq, hash, (seq IS NULL)::bool AS seq_missing
FROM orangerail.audit_heads WHERE tenant_id = @tenant_id;

-- name: AuditVerifySQL :many
-- nothing_visible has no seq: 0 here.
SELECT coalesce(v.seq, 0)::bigint AS seq, v.problem::text AS problem,
       v.expected_hash::bytea AS expected_hash, v.found_hash::bytea AS found_hash
FROM orangerail.audit_verify(@tenant_id::text) AS v;

-- name: AuditUnfinished :many
SELECT coalesce(u.seq, 0)::bigint AS seq, u.correlation_id::text AS correlation_id,
       u.action::text AS action, u.at::timestamptz AS at
FROM orangerail.audit_unfinished(@tenant_id::text) AS u;

-- name: AuditUnfinishedExecution :one
-- The unfinished execution of correlation_id (audit_unfinished's), with
-- its execution_started record's approval, and how long ago the database
-- wrote that record (its own clock: written_at, else the entry's at):
-- what settling it needs. approval_id is '' for a call that ran without
-- one.
SELECT coalesce(u.action, '')::text AS action,
       coalesce(s.approval_id::text, '')::text AS approval_id,
       (extract(epoch FROM now() - coalesce(s.written_at, s.at)) * 1000000)::bigint AS age_us
FROM orangerail.audit_unfinished(@tenant_id::text) AS u
CROSS JOIN LATERAL (
    SELECT x.approval_id, x.written_at, x.at FROM orangerail.audit x
    WHERE x.tenant_id = @tenant_id::text AND x.correlation_id = u.correlation_id AND x.phase = 'execution_started'
    ORDER BY x.id DESC LIMIT 1) s
WHERE u.correlation_id = @correlation_id::text
LIMIT 1;

-- name: AuditCorrelationProgress :one
-- The phases of a correlation id's records, in chain order (a sealed
-- record by seq, before any unsealed one; unsealed ones as written), and
-- whether an execution of it holds a budget slot whose lease has not
-- expired: one row, so that a row reader reads it without a transaction.
SELECT coalesce((SELECT array_agg(a.phase ORDER BY a.seq NULLS LAST, a.id)
                 FROM orangerail.audit a
                 WHERE a.tenant_id = @tenant_id AND a.correlation_id = @correlation_id), '{}')::text[] AS phases,
       EXISTS (SELECT FROM orangerail.budget_leases l
               WHERE l.tenant_id = @tenant_id AND l.correlation_id = @correlation_id AND l.expires_at > now()) AS leased;

-- name: AuditSettleLock :exec
-- Held until the transaction ends: two operators settling one execution
-- at once settle it once, and its end waits for the settle (migration
-- 00063). A row no auditor may lock (migration 00068), where an advisory
-- lock any login may hold was.
SELECT orangerail.settle_lock(@tenant_id::text, @correlation_id::text);

-- name: ApprovalsUnaudited :many
-- The first row_limit, each with the count of all (total).
SELECT u.approval_id::uuid AS approval_id, u.action::text AS action,
       u.consumed_at::timestamptz AS consumed_at, count(*) OVER ()::bigint AS total
FROM orangerail.approvals_unaudited(@tenant_id::text) AS u
LIMIT @row_limit::integer;

-- name: TenantOpen :exec
-- The transaction's tenant, and the head of its empty chain, unless they
-- exist (migration 00037).
SELECT orangerail.tenant_open();

-- name: TenantList :many
-- Every tenant with a row, a chain head or a record the caller sees: a
-- chain whose tenant row and head were deleted is still listed, and
-- verified, not skipped, when the caller sees every record (a login that
-- bypasses Row Level Security: engine.VerifyTenants). The records' tenants
-- are read by skipping through the (tenant_id, seq) index, one probe a
-- tenant.
WITH RECURSIVE recorded AS (
    (SELECT a.tenant_id FROM orangerail.audit a ORDER BY a.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT a.tenant_id FROM orangerail.audit a WHERE a.tenant_id > r.tenant_id ORDER BY a.tenant_id LIMIT 1)
    FROM recorded r
    WHERE r.tenant_id IS NOT NULL
)
SELECT t.id::text AS id FROM orangerail.tenants t
UNION
SELECT h.tenant_id FROM orangerail.audit_heads h
UNION
SELECT r.tenant_id FROM recorded r WHERE r.tenant_id IS NOT NULL
ORDER BY 1;

-- name: ApprovalsUnexplained :many
-- The first row_limit, each with the count of all (total).
SELECT u.approval_id::uuid AS approval_id, u.action::text AS action, u.status::text AS status,
       u.missing::text[] AS missing, count(*) OVER ()::bigint AS total
FROM orangerail.approvals_unexplained(@tenant_id::text) AS u
LIMIT @row_limit::integer;

-- name: AuditUnexplainedExecutions :many
-- The first row_limit, each with the count of all (total).
SELECT coalesce(u.seq, 0)::bigint AS seq, u.approval_id::uuid AS approval_id, u.phase::text AS phase,
       u.action::text AS action, u.missing::text[] AS missing, count(*) OVER ()::bigint AS total
FROM orangerail.audit_unexplained_executions(@tenant_id::text) AS u
LIMIT @row_limit::integer;

-- name: AuditPage :many
-- One page of a tenant's records, newest first, before seq @before_seq
-- (0: from the head), sealed records only, their entries only with_entry
-- (else empty). An empty filter selects every one.
SELECT seq::bigint AS seq, CASE WHEN @with_entry::boolean THEN entry ELSE ''::bytea END AS entry, at, correlation_id, phase, action,
       actor, actor_kind, dev_mode, approval_id, prev_hash::bytea AS prev_hash, hash::bytea AS hash
FROM orangerail.audit
WHERE tenant_id = @tenant_id AND seq IS NOT NULL
  AND (@before_seq::bigint = 0 OR seq < @before_seq::bigint)
  AND (@correlation_id::text = '' OR correlation_id = @correlation_id::text)
  AND (@action::text = '' OR action = @action::text)
  AND (@actor::text = '' OR actor = @actor::text)
  AND (@phase::text = '' OR phase = @phase::text)
ORDER BY seq DESC
LIMIT @row_limit;

-- name: AuditBreakGlass :many
SELECT coalesce(b.seq, 0)::bigint AS seq, coalesce(b.approval_id::text, '')::text AS approval_id, b.phase::text AS phase,
       b.operator::text AS operator, b.at::timestamptz AS at, b.reason::text AS reason,
       coalesce(b.settled_outcome, '')::text AS settled_outcome, coalesce(b.auditor, '')::text AS auditor
FROM orangerail.audit_break_glass(@tenant_id::text) AS b;

-- name: AuditUnsealedPage :many
-- One page of a tenant's unsealed records in the order they were written,
-- after id @after_id.
-- Only an operator's record brings its entry (for the reason it gives):
-- the others' are not read, so a page's size does not grow with them. A
-- column emptied where a superuser dropped its constraint reads as empty
-- (it relates to nothing, as in SQL's relations), a NULL time as when the
-- record was written: the record is not sealed, so not yet checked.
SELECT id, (CASE WHEN actor_kind = 'operator' THEN entry END)::bytea AS entry,
       coalesce(at, written_at, 'epoch')::timestamptz AS at, coalesce(correlation_id, '')::text AS correlation_id,
       coalesce(phase, '')::text AS phase, action, coalesce(actor, '')::text AS actor, coalesce(actor_kind, '')::text AS actor_kind, approval_id
FROM orangerail.audit
WHERE tenant_id = @tenant_id AND seq IS NULL AND id > @after_id::bigint
ORDER BY id
LIMIT @row_limit;

-- name: AuditFirstUnmatched :one
-- The first of the tenant's records from seq first to last whose columns
-- the server does not read in its entry, by the SQL verifier's own test
-- (false for an entry it cannot read at all).
SELECT a.seq::bigint AS seq, a.hash
FROM orangerail.audit a
WHERE a.tenant_id = @tenant_id AND a.seq BETWEEN @first::bigint AND @last::bigint
  AND NOT orangerail.audit_columns_match(a)
ORDER BY a.seq
LIMIT 1;
