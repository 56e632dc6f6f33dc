-- name: BudgetSpend :one
-- Spends one execution of the action, or says why not, in one statement
-- (orangerail.budget_spend, migration 00026): locks the counts, forgets
-- expired leases and counts the live ones, and counts the execution and
-- takes its lease unless a limit is reached (refused_by, else ''). Every
-- execution spends, a poll of an approval another poll holds a slot for
-- too (the function has no rule that holds it back since migration
-- 00035; p_approved is not read): of racing polls the consume lets one
-- execute and the others give their count back. Sent again after its connection died, a spend that committed
-- answers spent.
SELECT s.spent::boolean AS spent, coalesce(s.refused_by, '')::text AS refused_by,
       s.minute_start::timestamptz AS minute_start, s.minute_calls::integer AS minute_calls,
       s.day_start::timestamptz AS day_start, s.day_calls::integer AS day_calls,
       s.running::integer AS running, s.first_expiry::timestamptz AS first_expiry, s.now::timestamptz AS now
FROM orangerail.budget_spend(@tenant_id, @action, @id, @correlation_id, @ttl_seconds::float8,
                             @per_minute::integer, @per_day::integer, @max_concurrent::integer, false) s;

-- name: BudgetLeaseRelease :execrows
-- Frees an execution's slot; one row if it was held.
DELETE FROM orangerail.budget_leases
WHERE tenant_id = @tenant_id AND action = @action AND id = @id;

-- name: BudgetRefund :exec
-- Gives back an execution whose effect never ran, in the windows it was
-- counted in, if they are still current.
UPDATE orangerail.budget_counts
SET minute_calls = CASE WHEN minute_start = @minute_start AND minute_calls > 0 THEN minute_calls - 1 ELSE minute_calls END,
    day_calls = CASE WHEN day_start = @day_start AND day_calls > 0 THEN day_calls - 1 ELSE day_calls END
WHERE tenant_id = @tenant_id AND action = @action;

-- name: BudgetLeaseExtend :exec
-- Extends an execution's own lease to last at least ttl_seconds from now,
-- as its start commits; a lease that lapsed and was forgotten meanwhile
-- (another spend deleted it) is not taken again.
UPDATE orangerail.budget_leases
SET expires_at = greatest(expires_at, now() + make_interval(secs => @ttl_seconds::float8))
WHERE tenant_id = @tenant_id AND action = @action AND id = @id;
