-- A budget is spent in one statement. Spending locked the action's counts
-- with its first statement and held the lock across three more round
-- trips (the leases' read, the take, COMMIT), so that every execution of
-- one tenant's action queued behind the network and scheduling of the one
-- before it, not only behind its few microseconds of work. budget_spend
-- does the same steps in one call, which the server sends with its scope
-- and its commit in one round trip (database.RowWriterWithoutFlush): the
-- lock is held from the counts' update to the commit, all inside Postgres.
--
-- It may be sent again after its connection died, since then nobody knows
-- whether it committed: a spend whose lease exists already committed, and
-- is answered as spent without being counted twice.
--
-- The steps, their order and the rules are the spend's before (see
-- internal/engine/budget.go): the counts are locked first, starting a new
-- minute's or day's count where its window passed; leases that expired are
-- forgotten, and the live ones counted, by a statement of their own after
-- the lock (each statement of a plpgsql function takes a new snapshot, so
-- it sees every lease committed before the lock was granted); another
-- execution of the same approval holding a lease spends nothing; a limit
-- reached refuses, the day's before the minute's before max_concurrent;
-- else the execution is counted and its lease taken.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.budget_spend(p_tenant text, p_action text, p_lease uuid, p_correlation_id text,
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
REVOKE ALL ON FUNCTION orangerail.budget_spend(text, text, uuid, text, float8, integer, integer, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.budget_spend(text, text, uuid, text, float8, integer, integer, integer, boolean) TO orangerail_runtime;

-- +goose Down
DROP FUNCTION orangerail.budget_spend(text, text, uuid, text, float8, integer, integer, integer, boolean);
