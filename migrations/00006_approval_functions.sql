-- Approvals change only through audited functions.
--
-- Before this migration the runtime role could INSERT and UPDATE approvals
-- directly: a login holding it could insert a row already 'approved' and no
-- record in the chain would say who decided it. Now the runtime has only
-- SELECT on approvals, and every change goes through one of the SECURITY
-- DEFINER functions below:
--
--   approval_stage    inserts a pending approval and appends its 'staged' record
--   approval_decide   pending -> approved|rejected, and appends that record
--   approval_expire   pending|approved -> expired once lapsed, and appends 'expired'
--   approval_consume  approved -> consumed (the compare-and-swap); the record
--                     of what followed (execution_started or a refusal) is
--                     appended by the caller in the same transaction, and the
--                     verifiers report a consume without one
--
-- Each audited change takes the record's canonical bytes, refuses (ORA05)
-- a record that does not describe the change — its phase, approval id,
-- action, tenant and, where a person or agent caused it, actor — and
-- appends it through audit_append in the same transaction. So the chain
-- explains every approval's status, and the verifiers below report any
-- approval or execution it does not explain.
--
-- Custom SQLSTATE raised here (classified in Go by code, never by text):
--   ORA05  an approval change does not carry the audit record that describes it

-- +goose Up

-- approval_tenant is the transaction's tenant, or ORA03.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_tenant() RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    RETURN v_tenant;
END
$fn$;
-- +goose StatementEnd

-- approval_record appends p_entry after checking that it records the
-- change: phase p_phase of approval p_id of action p_action in the
-- transaction's tenant, caused by p_actor when it is not NULL.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_record(p_entry bytea, p_id uuid, p_phase text, p_action text, p_actor text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c orangerail.audit_columns := orangerail.audit_entry_columns(p_entry);
BEGIN
    IF c.phase IS DISTINCT FROM p_phase OR c.approval_id IS DISTINCT FROM p_id
       OR c.action IS DISTINCT FROM p_action OR c.tenant_id IS DISTINCT FROM orangerail.approval_tenant()
       OR (p_actor IS NOT NULL AND c.actor IS DISTINCT FROM p_actor) THEN
        RAISE EXCEPTION 'the audit record does not describe this approval change (%)', p_phase USING ERRCODE = 'ORA05';
    END IF;
    PERFORM orangerail.audit_append(p_entry);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- approval_decide returns no row when the approval is not pending or has
-- lapsed: it was decided already, or expired.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_decide(p_id uuid, p_status text, p_decided_by text, p_note text, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    IF p_status NOT IN ('approved', 'rejected') THEN
        RAISE EXCEPTION 'a decision is approved or rejected, not %', p_status USING ERRCODE = 'ORA04';
    END IF;
    UPDATE orangerail.approvals a
        SET status = p_status, decided_by = p_decided_by, decided_at = now(), decision_note = p_note
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'pending' AND a.expires_at > now()
        RETURNING a.* INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM orangerail.approval_record(p_entry, p_id, p_status, r.action, p_decided_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- approval_expire returns no row when the approval is not open or has not
-- lapsed: someone else expired, decided or consumed it meanwhile.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_expire(p_id uuid, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    UPDATE orangerail.approvals a SET status = 'expired'
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant()
          AND a.status IN ('pending', 'approved') AND a.expires_at <= now()
        RETURNING a.* INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM orangerail.approval_record(p_entry, p_id, 'expired', r.action, NULL);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- approval_consume is the consume compare-and-swap: exactly one caller gets
-- the row. No row: someone else consumed it, it was never approved, or it
-- lapsed.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_consume(p_id uuid)
RETURNS SETOF orangerail.approvals
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    UPDATE orangerail.approvals a SET status = 'consumed', consumed_at = now()
    WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'approved' AND a.expires_at > now()
    RETURNING a.*;
$fn$;
-- +goose StatementEnd

-- The records each status needs in the chain. The Go verifier uses the
-- same table (internal/engine/phase.go); a test holds them equal.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_required_phases(p_status text) RETURNS text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE p_status
        WHEN 'pending'  THEN ARRAY['staged']
        WHEN 'approved' THEN ARRAY['staged', 'approved']
        WHEN 'rejected' THEN ARRAY['staged', 'rejected']
        WHEN 'expired'  THEN ARRAY['staged', 'expired']
        WHEN 'consumed' THEN ARRAY['staged', 'approved']
    END
$fn$;
-- +goose StatementEnd

-- approvals_unexplained lists a tenant's approvals whose status the chain
-- does not explain, and the records missing: an approval a writer put in
-- the table without the records the functions above append.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approvals_unexplained(p_tenant text)
RETURNS TABLE (approval_id uuid, action text, status text, missing text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p.id, p.action, p.status, m.missing
    FROM orangerail.approvals p
    CROSS JOIN LATERAL (
        SELECT array_agg(r.phase ORDER BY r.ord) AS missing
        FROM unnest(orangerail.approval_required_phases(p.status)) WITH ORDINALITY AS r(phase, ord)
        WHERE NOT EXISTS (
            SELECT FROM orangerail.audit a
            WHERE a.tenant_id = p.tenant_id AND a.approval_id = p.id AND a.phase = r.phase)
    ) m
    WHERE p.tenant_id = p_tenant AND m.missing IS NOT NULL
    ORDER BY p.created_at, p.id
$fn$;
-- +goose StatementEnd

-- audit_unexplained_executions lists a tenant's records that follow the
-- consume of an approval (the phases of approvals_unaudited) but are not
-- preceded in the chain by that approval's staged and approved records:
-- an execution nobody can be shown to have approved.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_unexplained_executions(p_tenant text)
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
            WHERE b.tenant_id = e.tenant_id AND b.approval_id = e.approval_id AND b.phase = r.phase AND b.seq < e.seq)
    ) m
    WHERE e.tenant_id = p_tenant AND e.approval_id IS NOT NULL AND m.missing IS NOT NULL
      AND e.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                      'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error')
    ORDER BY e.seq
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.approval_tenant(), orangerail.approval_record(bytea, uuid, text, text, text),
    orangerail.approval_stage(uuid, text, text, json, bytea, bytea, timestamptz, bytea),
    orangerail.approval_decide(uuid, text, text, text, bytea), orangerail.approval_expire(uuid, bytea),
    orangerail.approval_consume(uuid), orangerail.approval_required_phases(text),
    orangerail.approvals_unexplained(text), orangerail.audit_unexplained_executions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, bytea, timestamptz, bytea),
    orangerail.approval_decide(uuid, text, text, text, bytea), orangerail.approval_expire(uuid, bytea),
    orangerail.approval_consume(uuid)
    TO orangerail_runtime;
GRANT EXECUTE ON FUNCTION orangerail.approval_required_phases(text), orangerail.approvals_unexplained(text),
    orangerail.audit_unexplained_executions(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- The runtime reads approvals; it changes them only through the functions.
REVOKE INSERT, UPDATE ON orangerail.approvals FROM orangerail_runtime;

-- +goose Down
GRANT INSERT, UPDATE ON orangerail.approvals TO orangerail_runtime;
DROP FUNCTION orangerail.audit_unexplained_executions(text);
DROP FUNCTION orangerail.approvals_unexplained(text);
DROP FUNCTION orangerail.approval_required_phases(text);
DROP FUNCTION orangerail.approval_consume(uuid);
DROP FUNCTION orangerail.approval_expire(uuid, bytea);
DROP FUNCTION orangerail.approval_decide(uuid, text, text, text, bytea);
DROP FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, bytea, timestamptz, bytea);
DROP FUNCTION orangerail.approval_record(bytea, uuid, text, text, text);
DROP FUNCTION orangerail.approval_tenant();
