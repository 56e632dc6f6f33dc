-- An auditor login given or losing read access to a tenant is recorded in
-- that tenant's chain.
--
-- `orangerail auditor grant` and `revoke` changed orangerail.auditor_grants
-- and nothing else: after an incident nobody could tell from the log who
-- could read a tenant's audit log and approvals, or since when. Each now
-- appends, in the transaction that changes the grant, an operator's
-- record (engine.RecordAuditorAccess): phase auditor_granted or
-- auditor_revoked, its actor the owner's login, its result {"auditor":
-- NAME}. audit_break_glass, which lists a tenant's operator records, gains
-- auditor: the login such a record names (NULL for any other record), read
-- as the Go verifier reads it. A function's result columns cannot change
-- in place, so it is made anew, with the same grants.

-- +goose Up
DROP FUNCTION orangerail.audit_break_glass(text);

-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_break_glass(p_tenant text)
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

REVOKE ALL ON FUNCTION orangerail.audit_break_glass(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_break_glass(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- +goose Down
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
