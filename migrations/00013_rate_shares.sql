-- Rate-limit counts flushed in batches: one row per bucket, fixed
-- one-minute window and replica (a front's BatchLimiter, named by a random
-- id it draws at start). A row holds the replica's cumulative count of the
-- window, never a delta, and a flush only ever raises it (GREATEST): sending
-- the same count again changes nothing, so a flush retried after its
-- answer was lost neither loses nor doubles a hit. The window's shared
-- total is the sum over its replicas. Like rate_counters the table is
-- UNLOGGED and holds no tenant data.

-- +goose Up
CREATE UNLOGGED TABLE orangerail.rate_shares (
    bucket       text        NOT NULL,
    window_start timestamptz NOT NULL,
    replica      uuid        NOT NULL,
    hits         integer     NOT NULL CHECK (hits > 0),
    PRIMARY KEY (bucket, window_start, replica)
);
CREATE INDEX rate_shares_window_idx ON orangerail.rate_shares (window_start);
REVOKE ALL ON orangerail.rate_shares FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON orangerail.rate_shares TO orangerail_runtime;

-- +goose Down
DROP TABLE orangerail.rate_shares;
