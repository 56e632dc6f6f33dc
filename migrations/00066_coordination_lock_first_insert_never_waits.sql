-- A sweeper that finds a tenant's sweep lock row missing no longer waits
-- on another sweeper's first insert of it.
--
-- coordination_lock(tenant, 'approval sweep', false) passes on where
-- another transaction holds the lock, except for the tenant's first sweep
-- (every tenant's, once 00065 is deployed): the row does not exist yet,
-- and two sweepers both insert it. The second's INSERT ... ON CONFLICT
-- waited on the first's uncommitted insert, for the whole of the first's
-- sweep transaction (a batch of expiries and of shreddings), or failed
-- when the lock timeout ran out first: the sweep of the tenant, and of
-- every tenant after it, was held up, or an error. The insert of the
-- non-waiting path now waits a millisecond at most; an insert that would
-- wait longer is another transaction's first, which holds the lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.coordination_lock(p_tenant text, p_purpose text, p_wait boolean) RETURNS boolean
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.coordination_lock(p_tenant text, p_purpose text, p_wait boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
    -- The tenant's first: a racing first insert is waited for once.
    INSERT INTO orangerail.coordination_locks (tenant_id, purpose) VALUES (p_tenant, p_purpose)
    ON CONFLICT (tenant_id, purpose) DO NOTHING;
    PERFORM FROM orangerail.coordination_locks c WHERE c.tenant_id = p_tenant AND c.purpose = p_purpose FOR UPDATE SKIP LOCKED;
    RETURN FOUND;
END
$fn$;
-- +goose StatementEnd
