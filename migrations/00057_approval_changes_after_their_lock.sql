-- A lapsed approval is never decided nor consumed, however long the change
-- waited for its row. approval_consume and approval_decide compared
-- expires_at with now() — the transaction's start, not the change's time —
-- and Postgres judged their condition before waiting on the row's lock,
-- and not again when the transaction holding it rolled back: a poll whose
-- transaction began before the approval lapsed, and whose consume waited
-- on another's hold of the row (a racing poll whose target read failed,
-- say) until after it lapsed, consumed and executed the lapsed approval,
-- up to lock_timeout late; a decision likewise approved one, recorded as
-- decided at its transaction's start. Each now locks the row first and
-- reads the clock once it holds it; decided_at and consumed_at are that
-- time. approval_expire reads the clock too, so a change refused as
-- lapsed finds the approval expirable in the same transaction.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_consume(p_id uuid)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    PERFORM FROM orangerail.approvals a
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant()
        FOR UPDATE;
    UPDATE orangerail.approvals a SET status = 'consumed', consumed_at = clock_timestamp()
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'approved'
          AND a.expires_at > clock_timestamp()
        RETURNING a.* INTO r;
    IF FOUND THEN
        RETURN NEXT r;
    END IF;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_decide(p_id uuid, p_status text, p_decided_by text, p_note text, p_entry bytea)
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
    PERFORM FROM orangerail.approvals a
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant()
        FOR UPDATE;
    UPDATE orangerail.approvals a
        SET status = p_status, decided_by = p_decided_by, decided_at = clock_timestamp(), decision_note = p_note
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'pending'
          AND a.expires_at > clock_timestamp()
        RETURNING a.* INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM orangerail.approval_record(p_entry, p_id, p_status, r.action, p_decided_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_expire(p_id uuid, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    UPDATE orangerail.approvals a SET status = 'expired'
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant()
          AND a.status IN ('pending', 'approved') AND a.expires_at <= clock_timestamp()
        RETURNING a.* INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM orangerail.approval_record(p_entry, p_id, 'expired', r.action, NULL);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_consume(p_id uuid)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    UPDATE orangerail.approvals a SET status = 'consumed', consumed_at = now()
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'approved' AND a.expires_at > now()
        RETURNING a.* INTO r;
    IF FOUND THEN
        RETURN NEXT r;
    END IF;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_decide(p_id uuid, p_status text, p_decided_by text, p_note text, p_entry bytea)
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_expire(p_id uuid, p_entry bytea)
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
