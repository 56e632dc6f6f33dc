-- Rate-limit counters shared by every replica of a deployment: one row per
-- bucket and fixed one-minute window. Buckets name a caller and a class
-- ("call:acme:agent-7:read") or a client address ("auth:203.0.113.9").
-- They hold no tenant data, so they need no row security. The table is
-- UNLOGGED: a count needs no durability (a crash resets the current minute),
-- and skipping the WAL keeps a counted request from waiting on a disk flush.

-- +goose Up
CREATE UNLOGGED TABLE orangerail.rate_counters (
    bucket       text        NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer     NOT NULL CHECK (hits > 0),
    PRIMARY KEY (bucket, window_start)
);
CREATE INDEX rate_counters_window_idx ON orangerail.rate_counters (window_start);
REVOKE ALL ON orangerail.rate_counters FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON orangerail.rate_counters TO orangerail_runtime;

-- +goose Down
DROP TABLE orangerail.rate_counters;
