-- A spend no longer waits, holding the counts, on a lapsed lease another
-- transaction holds.
--
-- budget_spend locks the action's counts, then deletes the leases that
-- have lapsed. A give-back (engine giveBack: an execution whose effect
-- never ran, or a release owed while the database was out of reach)
-- deletes its lease, then locks the counts to refund its count. When that
-- lease had lapsed, the two took the same two locks in opposite orders:
-- the spend, holding the counts, waited on the lease row the give-back had
-- deleted, and the give-back waited on the counts. Postgres broke the
-- deadlock after deadlock_timeout (1s), every spend of the action queued
-- meanwhile, by aborting one: a call that should have run failed, or the
-- refund was lost. The spend now skips a lapsed lease another transaction
-- holds (FOR UPDATE SKIP LOCKED): lapsed, it is not counted either way,
-- and whoever holds it deletes it or leaves it for the next spend.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.budget_spend(p_tenant text, p_action text, p_lease uuid, p_correlation_id text,
    p_ttl_seconds float8, p_per_minute integer, p_per_day integer, p_max_concurrent integer, p_approved boolean)
RETURNS TABLE (spent boolean, held boolean, refused_by text, minute_start timestamptz, minute_calls integer,
               day_start timestamptz, day_calls integer, running integer, first_expiry timestamptz, now timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    INSERT INTO orangerail.budget_counts AS b (tenant_id, action, minute_start, minute_calls, day_start, day_calls)
    VALUES (p_tenant, p_action, date_trunc('minute', now(), 'UTC'), 0, date_trunc('day', now(), 'UTC'), 0)
    ON CONFLICT (tenant_id, action) DO UPDATE
    -- A window only moves forwards: a spend whose transaction began in
    -- an older window than the row's (it waited for the row's lock while
    -- a later one committed) counts in the row's.
    SET minute_calls = CASE WHEN b.minute_start >= excluded.minute_start THEN b.minute_calls ELSE 0 END,
        minute_start = greatest(b.minute_start, excluded.minute_start),
        day_calls = CASE WHEN b.day_start >= excluded.day_start THEN b.day_calls ELSE 0 END,
        day_start = greatest(b.day_start, excluded.day_start)
    RETURNING b.minute_start, b.minute_calls, b.day_start, b.day_calls, now()
    INTO minute_start, minute_calls, day_start, day_calls, now;
    spent := false;
    -- Every execution spends, whatever else runs: p_approved is not read
    -- and held is always false.
    held := false;
    IF EXISTS (SELECT FROM orangerail.budget_leases l
               WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.id = p_lease) THEN
        -- This very spend, sent before, committed: it counted then.
        spent := true;
    END IF;
    -- A lapsed lease another transaction holds (a give-back deleting it,
    -- then locking these counts to refund; a start extending it) is
    -- passed over, not waited on while these counts are locked: it counts
    -- for nothing either way, and waiting was a deadlock with the
    -- give-back.
    DELETE FROM orangerail.budget_leases p
    WHERE p.tenant_id = p_tenant AND p.action = p_action
      AND p.id IN (SELECT l.id FROM orangerail.budget_leases l
                   WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at <= now()
                   FOR UPDATE SKIP LOCKED);
    SELECT count(*)::integer, coalesce(min(l.expires_at), now())
    INTO running, first_expiry
    FROM orangerail.budget_leases l
    WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at > now();
    IF spent THEN
        RETURN NEXT;
        RETURN;
    END IF;
    refused_by := CASE
        WHEN day_calls >= p_per_day THEN 'daily_call_budget'
        WHEN minute_calls >= p_per_minute THEN 'calls_per_minute'
        WHEN running >= p_max_concurrent THEN 'max_concurrent'
    END;
    IF refused_by IS NOT NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    UPDATE orangerail.budget_counts c SET minute_calls = c.minute_calls + 1, day_calls = c.day_calls + 1
    WHERE c.tenant_id = p_tenant AND c.action = p_action;
    INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
    VALUES (p_tenant, p_action, p_lease, p_correlation_id, now() + make_interval(secs => p_ttl_seconds));
    spent := true;
    RETURN NEXT;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.budget_spend(p_tenant text, p_action text, p_lease uuid, p_correlation_id text,
    p_ttl_seconds float8, p_per_minute integer, p_per_day integer, p_max_concurrent integer, p_approved boolean)
RETURNS TABLE (spent boolean, held boolean, refused_by text, minute_start timestamptz, minute_calls integer,
               day_start timestamptz, day_calls integer, running integer, first_expiry timestamptz, now timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    INSERT INTO orangerail.budget_counts AS b (tenant_id, action, minute_start, minute_calls, day_start, day_calls)
    VALUES (p_tenant, p_action, date_trunc('minute', now(), 'UTC'), 0, date_trunc('day', now(), 'UTC'), 0)
    ON CONFLICT (tenant_id, action) DO UPDATE
    -- A window only moves forwards: a spend whose transaction began in
    -- an older window than the row's (it waited for the row's lock while
    -- a later one committed) counts in the row's.
    SET minute_calls = CASE WHEN b.minute_start >= excluded.minute_start THEN b.minute_calls ELSE 0 END,
        minute_start = greatest(b.minute_start, excluded.minute_start),
        day_calls = CASE WHEN b.day_start >= excluded.day_start THEN b.day_calls ELSE 0 END,
        day_start = greatest(b.day_start, excluded.day_start)
    RETURNING b.minute_start, b.minute_calls, b.day_start, b.day_calls, now()
    INTO minute_start, minute_calls, day_start, day_calls, now;
    spent := false;
    -- Every execution spends, whatever else runs: p_approved is not read
    -- and held is always false.
    held := false;
    IF EXISTS (SELECT FROM orangerail.budget_leases l
               WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.id = p_lease) THEN
        -- This very spend, sent before, committed: it counted then.
        spent := true;
    END IF;
    DELETE FROM orangerail.budget_leases p
    WHERE p.tenant_id = p_tenant AND p.action = p_action AND p.expires_at <= now();
    SELECT count(*)::integer, coalesce(min(l.expires_at), now())
    INTO running, first_expiry
    FROM orangerail.budget_leases l
    WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at > now();
    IF spent THEN
        RETURN NEXT;
        RETURN;
    END IF;
    refused_by := CASE
        WHEN day_calls >= p_per_day THEN 'daily_call_budget'
        WHEN minute_calls >= p_per_minute THEN 'calls_per_minute'
        WHEN running >= p_max_concurrent THEN 'max_concurrent'
    END;
    IF refused_by IS NOT NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    UPDATE orangerail.budget_counts c SET minute_calls = c.minute_calls + 1, day_calls = c.day_calls + 1
    WHERE c.tenant_id = p_tenant AND c.action = p_action;
    INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
    VALUES (p_tenant, p_action, p_lease, p_correlation_id, now() + make_interval(secs => p_ttl_seconds));
    spent := true;
    RETURN NEXT;
END
$fn$;
-- +goose StatementEnd
