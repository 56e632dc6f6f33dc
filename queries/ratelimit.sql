-- name: RateHit :one
-- Counts one hit in a bucket's current window and returns the window's total.
INSERT INTO orangerail.rate_counters AS c (bucket, window_start, hits)
VALUES (@bucket, date_trunc('minute', now()), 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits, c.window_start;

-- name: RatePrune :exec
-- Forgets windows that ended more than a minute ago.
DELETE FROM orangerail.rate_counters WHERE window_start < now() - interval '2 minutes';


-- name: RateShareFlush :exec
-- Raises each (bucket, window) row of one replica to the replica's
-- cumulative count: idempotent, so a retried flush never double counts.
INSERT INTO orangerail.rate_shares AS s (bucket, window_start, replica, hits)
SELECT u.b, u.w, @replica::uuid, u.h
FROM (SELECT unnest(@buckets::text[]) AS b, unnest(@windows::timestamptz[]) AS w, unnest(@hits::integer[]) AS h) AS u
ON CONFLICT (bucket, window_start, replica) DO UPDATE SET hits = GREATEST(s.hits, excluded.hits);

-- name: RateShareTotals :many
-- The other replicas' totals of each (bucket, window), and the database's
-- clock as this statement runs (not as its transaction began: the caller
-- brackets the statement's round trip to estimate its skew).
SELECT u.b::text AS bucket, u.w::timestamptz AS window_start,
       coalesce(sum(s.hits) FILTER (WHERE s.replica <> @replica::uuid), 0)::integer AS others,
       clock_timestamp()::timestamptz AS now
FROM (SELECT unnest(@buckets::text[]) AS b, unnest(@windows::timestamptz[]) AS w) AS u
LEFT JOIN orangerail.rate_shares s ON s.bucket = u.b AND s.window_start = u.w
GROUP BY u.b, u.w;

-- name: RateSharePrune :exec
-- Forgets windows that ended more than a minute ago.
DELETE FROM orangerail.rate_shares WHERE window_start < now() - interval '2 minutes';
