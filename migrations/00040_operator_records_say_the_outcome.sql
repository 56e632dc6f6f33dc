-- audit_break_glass lists an operator's records with their reason, but an
-- execution_settled record's outcome — whether the operator found that
-- the effect took place — was left in its entry: an auditor reading the
-- list after an incident could not tell a settled success from a settled
-- failure. The list gains settled_outcome (NULL for a record that settles
-- nothing), read as the Go verifier reads it. A function's result columns
-- cannot change in place, so it is made anew, with the same grants.

-- +goose Up
DROP FUNCTION orangerail.audit_break_glass(text);

-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text, settled_outcome text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(e.doc->'result'->>'break_glass_reason', ''),
           CASE WHEN a.phase = 'execution_settled' THEN e.doc->'result'->>'settled_outcome' END
    FROM orangerail.audit a
    CROSS JOIN LATERAL (SELECT convert_from(a.entry, 'UTF8')::jsonb AS doc) e
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq NULLS LAST, a.id
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.audit_break_glass(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_break_glass(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- +goose Down
DROP FUNCTION orangerail.audit_break_glass(text);

-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(convert_from(a.entry, 'UTF8')::jsonb->'result'->>'break_glass_reason', '')
    FROM orangerail.audit a
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq NULLS LAST, a.id
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.audit_break_glass(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_break_glass(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;
