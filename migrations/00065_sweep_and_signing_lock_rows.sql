-- The sweep and the checkpoint signer coordinate on rows no auditor may
-- lock, not on advisory locks.
--
-- One replica sweeps a tenant at a time (ApprovalSweepLock) and one signs
-- its checkpoints (CheckpointSignLock); both took an advisory lock keyed
-- on the tenant's id alone. The advisory-lock built-ins belong to the
-- bootstrap superuser: where the migrations ran as a login that is no
-- superuser, 00003/00004 could not revoke them from PUBLIC nor 00055 from
-- orangerail_auditor (it only warned; hardening_gaps lists the gap). Any
-- auditor login, one granted only another tenant, could then hold those
-- locks for as long as its session lasted: the tenant's sweep (expiry
-- records, the shredding of sealed inputs past retention) was skipped
-- every round, and its checkpoints failed to sign.
--
-- The two now lock a row of orangerail.coordination_locks, one per tenant
-- and purpose, through coordination_lock, which only orangerail_runtime
-- may execute. No other role holds any privilege on the table, and every
-- row lock (FOR UPDATE, FOR SHARE, FOR KEY SHARE) needs UPDATE on it, so
-- no auditor, whatever built-ins it may execute, can hold what they wait
-- on. The table has no row security: nothing but the owner's function
-- reaches it, and its rows hold nothing but names (a runtime taking
-- another tenant's, as an advisory lock could, only serializes).
--
-- A sweeper, which may not wait, never waits on another's first insert of
-- a tenant's row either (every tenant's first sweep once this is
-- deployed): that insert, uncommitted, holds the lock, so the second
-- passes on after a millisecond at most, where it would have waited out
-- the first's whole sweep transaction or failed on the lock timeout.

-- +goose Up
CREATE TABLE orangerail.coordination_locks (
    tenant_id text NOT NULL,
    purpose   text NOT NULL CHECK (purpose IN ('approval sweep', 'checkpoint sign')),
    PRIMARY KEY (tenant_id, purpose)
);
REVOKE ALL ON orangerail.coordination_locks FROM PUBLIC;

-- +goose StatementBegin
CREATE FUNCTION orangerail.coordination_lock(p_tenant text, p_purpose text, p_wait boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    saved text;
BEGIN
    IF p_wait THEN
        -- Waits (within the lock timeout) for whoever holds it.
        INSERT INTO orangerail.coordination_locks (tenant_id, purpose) VALUES (p_tenant, p_purpose)
        ON CONFLICT (tenant_id, purpose) DO NOTHING;
        PERFORM FROM orangerail.coordination_locks c WHERE c.tenant_id = p_tenant AND c.purpose = p_purpose FOR UPDATE;
        RETURN true;
    END IF;
    -- Passes on where another transaction holds it.
    PERFORM FROM orangerail.coordination_locks c WHERE c.tenant_id = p_tenant AND c.purpose = p_purpose FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT FROM orangerail.coordination_locks c WHERE c.tenant_id = p_tenant AND c.purpose = p_purpose) THEN
        RETURN false;
    END IF;
    -- The tenant's first. Another transaction's first insert of the row,
    -- not yet committed, would be waited for (for as long as that
    -- transaction lasts: a whole sweep): it holds the lock, so this one
    -- passes on, after a wait of a millisecond at most. The lock timeout
    -- set here lasts only until the insert is done, with or without it.
    saved := current_setting('lock_timeout');
    BEGIN
        PERFORM set_config('lock_timeout', '1ms', true);
        INSERT INTO orangerail.coordination_locks (tenant_id, purpose) VALUES (p_tenant, p_purpose)
        ON CONFLICT (tenant_id, purpose) DO NOTHING;
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', saved, true);
    PERFORM FROM orangerail.coordination_locks c WHERE c.tenant_id = p_tenant AND c.purpose = p_purpose FOR UPDATE SKIP LOCKED;
    RETURN FOUND;
END
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.coordination_lock(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.coordination_lock(text, text, boolean) TO orangerail_runtime;

-- +goose Down
DROP FUNCTION orangerail.coordination_lock(text, text, boolean);
DROP TABLE orangerail.coordination_locks;
