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

-- name: BudgetLeasesPrune :exec
-- Forgets the action's leases that expired: their executions' replicas
-- died before releasing them.
DELETE FROM orangerail.budget_leases
WHERE tenant_id = @tenant_id AND action = @action AND expires_at <= now();

-- name: BudgetLeasesLive :one
-- The action's executions running now, and when the first of their leases
-- expires (now, when none runs).
SELECT count(*)::integer AS running, coalesce(min(expires_at), now())::timestamptz AS first_expiry
FROM orangerail.budget_leases
WHERE tenant_id = @tenant_id AND action = @action AND expires_at > now();

-- name: BudgetSpend :exec
-- Counts one execution in the current minute and day (opened by BudgetOpen
-- in the same transaction).
UPDATE orangerail.budget_counts SET minute_calls = minute_calls + 1, day_calls = day_calls + 1
WHERE tenant_id = @tenant_id AND action = @action;

-- name: BudgetLeaseTake :exec
-- Holds a slot for one execution until it ends, or until expires_at.
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

-- name: BudgetLeaseHeld :one
-- Whether a live lease is held for the execution of correlation_id (an
-- approval's id): another poll of that approval is executing it.
SELECT EXISTS (
    SELECT FROM orangerail.budget_leases
    WHERE tenant_id = @tenant_id AND action = @action AND correlation_id = @correlation_id AND expires_at > now()
) AS held;
