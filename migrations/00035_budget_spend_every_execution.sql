-- budget_spend loses the held rule: every execution spends.
--
-- With p_approved true, a poll that found another poll of its approval
-- holding a slot spent nothing and went on to the consume; winning it ran
-- the effect unspent (concurrent polls ran past daily_call_budget and
-- max_concurrent). Since cfb89b7 the server passes false, so every poll
-- spends as its own execution and the losers of the consume give their
-- count back. The rule is gone from the function too, so no caller can
-- turn it on again, and its lease scan no longer looks for another poll's
-- slot. The signature stays (p_approved is ignored, held always false):
-- a replica still running the code before this migration calls it as
-- before.

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

-- +goose Down
-- budget_spend as migrations/00026 made it.
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
    held := false;
    IF EXISTS (SELECT FROM orangerail.budget_leases l
               WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.id = p_lease) THEN
        -- This very spend, sent before, committed: it counted then.
        spent := true;
    END IF;
    DELETE FROM orangerail.budget_leases p
    WHERE p.tenant_id = p_tenant AND p.action = p_action AND p.expires_at <= now();
    SELECT count(*)::integer, coalesce(min(l.expires_at), now()),
           coalesce(bool_or(l.correlation_id = p_correlation_id AND l.id <> p_lease), false)
    INTO running, first_expiry, held
    FROM orangerail.budget_leases l
    WHERE l.tenant_id = p_tenant AND l.action = p_action AND l.expires_at > now();
    IF spent THEN
        held := false;
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_approved AND held THEN
        -- Another poll of this approval holds a slot to execute it: this
        -- one spends nothing, and its consume, which one poll wins,
        -- answers it.
        RETURN NEXT;
        RETURN;
    END IF;
    held := false; -- a call's execution is its own, whatever else runs
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
