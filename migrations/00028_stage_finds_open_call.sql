-- A call is staged in one statement, not two: approval_stage answers an
-- identical call's open approval itself (staging nothing; the caller sees
-- another id than the one it proposed), where the engine asked for it in
-- a statement and round trip of its own before staging
-- (ApprovalFindOpen). Staging waits on Postgres four times, not five
-- (internal/engine TestGovernedCycleRoundTrips). Two identical calls
-- staged at once still meet at approvals_open_call_idx: the second's
-- INSERT fails (23505), and the engine asks again, finding the first's.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_input_sealed bytea, p_input_data_key bytea,
    p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    -- An identical call's open approval is the answer: nothing is
    -- staged, and the caller, seeing another id than p_id, knows it
    -- (approvals_open_call_idx holds at most one).
    SELECT * INTO r FROM orangerail.approvals a
    WHERE a.tenant_id = v_tenant AND a.requested_by = p_requested_by AND a.action = p_action
      AND a.input_digest = p_input_digest AND a.status IN ('pending', 'approved');
    IF FOUND THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    -- Read first: an INSERT … ON CONFLICT of a row that exists costs a
    -- speculative insertion, at every stage of the tenant's life.
    IF NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, input_key_id,
                                      input_sealed, input_data_key, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_input_key_id,
                p_input_sealed, p_input_data_key, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_input_sealed bytea, p_input_data_key bytea,
    p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    -- Read first: an INSERT … ON CONFLICT of a row that exists costs a
    -- speculative insertion, at every stage of the tenant's life.
    IF NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, input_key_id,
                                      input_sealed, input_data_key, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_input_key_id,
                p_input_sealed, p_input_data_key, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd
