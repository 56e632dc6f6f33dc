-- name: RateHit :one
-- Counts one hit in a bucket's current window and returns the window's total.
INSERT INTO orangerail.rate_counters AS c (bucket, window_start, hits)
VALUES (@bucket, date_trunc('minute', now()), 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits, c.window_start;

-- name: RatePrune :exec
-- Forgets windows that ended more than a minute ago.
DELETE FROM orangerail.rate_counters WHERE window_start < now() - interval '2 minutes';

