-- An approval is approved or rejected only by a person's recorded decision.
--
-- approval_record held a change's audit record to the change (its phase,
-- approval, action, tenant, and an actor named as the decider) but not to
-- who that actor was: a decision recorded as the requesting agent's own,
-- or the system's, moved an approval to approved, approval_consume handed
-- it over for execution, and no person's decision stood in the chain. The
-- engine refuses such deciders (Caller.person), but the database is where
-- the lifecycle holds against a runtime that is compromised or wrong: a
-- decision's record must name a human, or an operator (whose records only
-- the schema's owner may append: audit_operator_guard). The rule sits in
-- approval_record, which reads the entry's columns once for every check.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_record(p_entry bytea, p_id uuid, p_phase text, p_action text, p_actor text)
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
    IF p_phase IN ('approved', 'rejected') AND c.actor_kind NOT IN ('human', 'operator') THEN
        RAISE EXCEPTION 'a decision is recorded as a person''s (a human or an operator), not a % one', c.actor_kind USING ERRCODE = 'ORA05';
    END IF;
    PERFORM orangerail.audit_insert(p_entry, c);
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_record(p_entry bytea, p_id uuid, p_phase text, p_action text, p_actor text)
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
    PERFORM orangerail.audit_insert(p_entry, c);
END
$fn$;
-- +goose StatementEnd
