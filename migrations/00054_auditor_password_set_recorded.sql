-- An auditor login's password set is recorded in the chain of each tenant
-- the login reads.
--
-- `orangerail auditor grant NAME --tenant T --password-env VAR` set the
-- login's password and recorded nothing when the grant stood already:
-- after an incident nobody could tell from the log since when a new
-- password read a tenant as that login. The grant now appends, in the
-- transaction that sets it, the owner's record auditor_password_set
-- (engine.RecordAuditorPasswordSet, result {"auditor": NAME}) to the chain
-- of every tenant the login reads: the password is the cluster's login's,
-- not one tenant's. audit_break_glass names the login of such a record in
-- its auditor column too, as the Go verifier reads it.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text, settled_outcome text, auditor text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(e.doc->'result'->>'break_glass_reason', ''),
           CASE WHEN a.phase = 'execution_settled' THEN e.doc->'result'->>'settled_outcome' END,
           CASE WHEN a.phase IN ('auditor_granted', 'auditor_revoked', 'auditor_password_set') THEN e.doc->'result'->>'auditor' END
    FROM orangerail.audit a
    CROSS JOIN LATERAL (SELECT convert_from(a.entry, 'UTF8')::jsonb AS doc) e
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq NULLS LAST, a.id
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text, settled_outcome text, auditor text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(e.doc->'result'->>'break_glass_reason', ''),
           CASE WHEN a.phase = 'execution_settled' THEN e.doc->'result'->>'settled_outcome' END,
           CASE WHEN a.phase IN ('auditor_granted', 'auditor_revoked') THEN e.doc->'result'->>'auditor' END
    FROM orangerail.audit a
    CROSS JOIN LATERAL (SELECT convert_from(a.entry, 'UTF8')::jsonb AS doc) e
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq NULLS LAST, a.id
$fn$;
-- +goose StatementEnd
