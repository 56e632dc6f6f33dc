-- The relations between records (an execution follows its approval's
-- staged and approved records; an execution started is finished by a
-- later record) are judged in chain order, not in the order of the id
-- column.
--
-- Since 00015 they compared ids: the order records were written in, their
-- only order while unsealed. But id is no part of what the chain or a
-- checkpoint covers. A table owner could insert the records an execution
-- lacks with ids chosen below the execution's (OVERRIDING SYSTEM VALUE),
-- changing no existing row; sealed after it, they sit after it in the
-- chain, which stays whole and consistent with every checkpoint kept, yet
-- the relations found nothing missing — and the Go verifier, which
-- follows unfinished executions in chain order, disagreed with the SQL one
-- about such a chain.
--
-- A record's place is now (seq, id) with an unsealed record's seq taken as
-- past every sealed one: two sealed records by seq, a sealed one before
-- any unsealed one, two unsealed ones by id (the order the sealers will
-- seal them in). For records written as orangerail writes them the two
-- orders agree: a record an execution depends on committed before the
-- execution's transaction wrote anything, so it has the lower id and is
-- sealed no later.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
RETURNS TABLE (seq bigint, correlation_id text, action text, at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.seq, s.correlation_id, s.action, s.at
    FROM orangerail.audit s
    WHERE s.tenant_id = p_tenant AND s.phase = 'execution_started'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit f
          WHERE f.tenant_id = s.tenant_id AND f.correlation_id = s.correlation_id
            AND (coalesce(f.seq, 9223372036854775807), f.id) > (coalesce(s.seq, 9223372036854775807), s.id)
            AND f.phase IN ('execution_succeeded', 'execution_failed'))
    ORDER BY s.seq NULLS LAST, s.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unexplained_executions(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, action text, missing text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.seq, e.approval_id, e.phase, e.action, m.missing
    FROM orangerail.audit e
    CROSS JOIN LATERAL (
        SELECT array_agg(r.phase ORDER BY r.ord) AS missing
        FROM unnest(ARRAY['staged', 'approved']) WITH ORDINALITY AS r(phase, ord)
        WHERE NOT EXISTS (
            SELECT FROM orangerail.audit b
            WHERE b.tenant_id = e.tenant_id AND b.approval_id = e.approval_id AND b.phase = r.phase
              AND (coalesce(b.seq, 9223372036854775807), b.id) < (coalesce(e.seq, 9223372036854775807), e.id))
    ) m
    WHERE e.tenant_id = p_tenant AND e.approval_id IS NOT NULL AND m.missing IS NOT NULL
      AND e.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                      'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error')
    ORDER BY e.seq NULLS LAST, e.id
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
RETURNS TABLE (seq bigint, correlation_id text, action text, at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.seq, s.correlation_id, s.action, s.at
    FROM orangerail.audit s
    WHERE s.tenant_id = p_tenant AND s.phase = 'execution_started'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit f
          WHERE f.tenant_id = s.tenant_id AND f.correlation_id = s.correlation_id
            AND f.id > s.id AND f.phase IN ('execution_succeeded', 'execution_failed'))
    ORDER BY s.seq NULLS LAST, s.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unexplained_executions(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, action text, missing text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.seq, e.approval_id, e.phase, e.action, m.missing
    FROM orangerail.audit e
    CROSS JOIN LATERAL (
        SELECT array_agg(r.phase ORDER BY r.ord) AS missing
        FROM unnest(ARRAY['staged', 'approved']) WITH ORDINALITY AS r(phase, ord)
        WHERE NOT EXISTS (
            SELECT FROM orangerail.audit b
            WHERE b.tenant_id = e.tenant_id AND b.approval_id = e.approval_id AND b.phase = r.phase AND b.id < e.id)
    ) m
    WHERE e.tenant_id = p_tenant AND e.approval_id IS NOT NULL AND m.missing IS NOT NULL
      AND e.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                      'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error')
    ORDER BY e.seq NULLS LAST, e.id
$fn$;
-- +goose StatementEnd
