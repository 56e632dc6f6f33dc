-- name: BudgetOpen :one
-- Locks the action's counts for the rest of the transaction, starting a new
-- minute's or day's count when its window has passed (UTC), and returns
-- them with the transaction's clock.
INSERT INTO orangerail.budget_counts AS b (tenant_id, action, minute_start, minute_calls, day_start, day_calls)
VALUES (@tenant_id, @action, date_trunc('minute', now(), 'UTC'), 0, date_trunc('day', now(), 'UTC'), 0)
ON CONFLICT (tenant_id, action) DO UPDATE
SET minute_calls = CASE WHEN b.minute_start = excluded.minute_start THEN b.minute_calls ELSE 0 END,
    minute_start = excluded.minute_start,
    day_calls = CASE WHEN b.day_start = excluded.day_start THEN b.day_calls ELSE 0 END,
    day_start = excluded.day_start
RETURNING b.minute_start, b.minute_calls, b.day_start, b.day_calls, now()::timestamptz AS now;

-- name: BudgetLeases :one
-- Forgets the action's leases that expired (their executions' replicas
-- died before releasing them) and reads the live ones: how many executions
-- run now, when the first of their leases expires (now, when none runs),
-- and whether one is held for correlation_id (another poll of that
-- approval is executing it). A statement of its own after BudgetOpen: its
-- snapshot, taken once the counts are locked, holds every lease a spend
-- before it committed.
WITH pruned AS (
    DELETE FROM orangerail.budget_leases p
    WHERE p.tenant_id = @tenant_id AND p.action = @action AND p.expires_at <= now()
)
SELECT count(*)::integer AS running, coalesce(min(l.expires_at), now())::timestamptz AS first_expiry,
       coalesce(bool_or(l.correlation_id = @correlation_id), false)::boolean AS held
FROM orangerail.budget_leases l
WHERE l.tenant_id = @tenant_id AND l.action = @action AND l.expires_at > now();

-- name: BudgetTake :exec
-- Counts one execution in the current minute and day (opened by BudgetOpen
-- in the same transaction), and holds a slot for it until it ends, or
-- until expires_at.
WITH counted AS (
    UPDATE orangerail.budget_counts SET minute_calls = minute_calls + 1, day_calls = day_calls + 1
    WHERE tenant_id = @tenant_id AND action = @action
)
INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
VALUES (@tenant_id, @action, @id, @correlation_id, now() + make_interval(secs => @ttl_seconds::float8));

-- name: BudgetLeaseRelease :exec
-- Frees an execution's slot.
DELETE FROM orangerail.budget_leases
WHERE tenant_id = @tenant_id AND action = @action AND id = @id;

-- name: BudgetRefund :exec
-- Gives back an execution whose effect never ran, in the windows it was
-- counted in, if they are still current.
UPDATE orangerail.budget_counts
SET minute_calls = CASE WHEN minute_start = @minute_start AND minute_calls > 0 THEN minute_calls - 1 ELSE minute_calls END,
    day_calls = CASE WHEN day_start = @day_start AND day_calls > 0 THEN day_calls - 1 ELSE day_calls END
WHERE tenant_id = @tenant_id AND action = @action;
