-- A budget's window never moves backwards.
--
-- budget_spend reads its minute and day from now(), the start of its
-- transaction, which it takes before it waits for the counts' row lock,
-- and reset the counts whenever the row's window differed from its own.
-- A spend whose transaction began in minute M but that got the lock after
-- a spend of minute M+1 had committed (it queued behind it: an ON
-- CONFLICT waiter, or a give-back holding the row) reset minute M's count
-- to 0 and was admitted though M's budget was spent, and moved the row
-- back to M; the next spend of M+1 reset it again, forgetting the spends
-- of M+1 before it. At midnight UTC the same reset the day's count. Both
-- minutes ran more than per_minute executions.
--
-- A window now only moves forwards: a spend whose own window is older
-- than the row's counts in the row's, the newer one; the refund of its
-- count (BudgetRefund) names that window too, as the spend returns it.

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
    SET minute_calls = CASE WHEN b.minute_start = excluded.minute_start THEN b.minute_calls ELSE 0 END,
        minute_start = excluded.minute_start,
        day_calls = CASE WHEN b.day_start = excluded.day_start THEN b.day_calls ELSE 0 END,
        day_start = excluded.day_start
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

