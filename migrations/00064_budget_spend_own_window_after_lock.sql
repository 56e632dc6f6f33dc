-- A spend is counted, and refunded, in its own windows, by the clock it
-- read once it held the counts.
--
-- budget_spend read its time from now(), the start of its transaction,
-- before it waited for the counts' row lock. A spend that waited judged
-- the leases by a time already past: a lease that lapsed while it waited
-- was counted as running (refused by max_concurrent with nothing running),
-- and a spend that waited across a minute's (or day's) end was counted in
-- the window before, refused by a window that had ended. It now locks the
-- counts first (creating them if none are yet), and reads clock_timestamp()
-- once it holds them; that time picks the windows, judges the leases, and
-- dates the lease it takes.
--
-- A spend sent again (its connection died with its answer unread) answered
-- spent by its lease, but with the counts' current windows: sent after the
-- minute or day turned, those were the newer ones, and the refund of an
-- execution whose effect never ran (BudgetRefund, which takes the windows
-- the spend answered) took a count of the newer window, another
-- execution's, and left its own counted. A lease now records the windows
-- its spend was counted in, and a spend sent again answers those. Leases
-- taken before this migration have none, and answer the counts' windows as
-- before (they lapse within an execution's bound).

-- +goose Up
ALTER TABLE orangerail.budget_leases ADD COLUMN minute_start timestamptz, ADD COLUMN day_start timestamptz;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.budget_spend(p_tenant text, p_action text, p_lease uuid, p_correlation_id text,
    p_ttl_seconds float8, p_per_minute integer, p_per_day integer, p_max_concurrent integer, p_approved boolean)
RETURNS TABLE (spent boolean, held boolean, refused_by text, minute_start timestamptz, minute_calls integer,
               day_start timestamptz, day_calls integer, running integer, first_expiry timestamptz, now timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    t timestamptz;
    own_minute timestamptz;
    own_day timestamptz;
BEGIN
    -- The counts are locked before the clock is read: the wait for them
    -- may be long, and the time that counts is when the spend holds them.
    -- (Each statement of this function takes a new snapshot, so after the
    -- wait it sees what the holder committed.) An action spent for the
    -- first time has no counts yet: they are created, a racing creator's
    -- waited for, and then locked.
    PERFORM FROM orangerail.budget_counts b WHERE b.tenant_id = p_tenant AND b.action = p_action FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO orangerail.budget_counts (tenant_id, action, minute_start, minute_calls, day_start, day_calls)
        VALUES (p_tenant, p_action, date_trunc('minute', clock_timestamp(), 'UTC'), 0, date_trunc('day', clock_timestamp(), 'UTC'), 0)
        ON CONFLICT (tenant_id, action) DO NOTHING;
        PERFORM FROM orangerail.budget_counts b WHERE b.tenant_id = p_tenant AND b.action = p_action FOR UPDATE;
    END IF;
    t := clock_timestamp();
    -- A window only moves forwards (migration 00050): the clock is read
    -- after the lock, but a row another spend moved on stays moved on.
    UPDATE orangerail.budget_counts b
    SET minute_calls = CASE WHEN b.minute_start >= date_trunc('minute', t, 'UTC') THEN b.minute_calls ELSE 0 END,
        minute_start = greatest(b.minute_start, date_trunc('minute', t, 'UTC')),
        day_calls = CASE WHEN b.day_start >= date_trunc('day', t, 'UTC') THEN b.day_calls ELSE 0 END,
        day_start = greatest(b.day_start, date_trunc('day', t, 'UTC'))
    WHERE b.tenant_id = p_tenant AND b.action = p_action
    RETURNING b.minute_start, b.minute_calls, b.day_start, b.day_calls
    INTO minute_start, minute_calls, day_start, day_calls;
    now := t;
    spent := false;
    -- Every execution spends, whatever else runs: p_approved is not read
    -- and held is always false.
    held := false;
    SELECT l.minute_start, l.day_start INTO own_minute, own_day
    FROM orangerail.budget_leases l
    WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.id = p_lease;
    IF FOUND THEN
        -- This very spend, sent before, committed: it counted then, in
        -- the windows its lease records, which its refund names.
        spent := true;
        minute_start := coalesce(own_minute, minute_start);
        day_start := coalesce(own_day, day_start);
    END IF;
    -- A lapsed lease another transaction holds (a give-back deleting it,
    -- then locking these counts to refund; a start extending it) is
    -- passed over, not waited on while these counts are locked: it counts
    -- for nothing either way, and waiting was a deadlock with the
    -- give-back.
    DELETE FROM orangerail.budget_leases p
    WHERE p.tenant_id = p_tenant AND p.action = p_action
      AND p.id IN (SELECT l.id FROM orangerail.budget_leases l
                   WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at <= t
                   FOR UPDATE SKIP LOCKED);
    SELECT count(*)::integer, coalesce(min(l.expires_at), t)
    INTO running, first_expiry
    FROM orangerail.budget_leases l
    WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at > t;
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
    INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at, minute_start, day_start)
    VALUES (p_tenant, p_action, p_lease, p_correlation_id, t + make_interval(secs => p_ttl_seconds), minute_start, day_start);
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

ALTER TABLE orangerail.budget_leases DROP COLUMN minute_start, DROP COLUMN day_start;
