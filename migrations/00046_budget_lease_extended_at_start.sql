-- An execution's budget lease is extended as its start commits.
--
-- A lease was taken at the spend, to last the effect's deadline and a
-- statement_timeout, and never extended. The waits between the spend and
-- the start — for a datasource connection, for a store connection, each
-- bounded by the deployment's limits but longer than the lease — could
-- outlast it: the execution then ran with no slot held, uncounted by
-- max_concurrent, and a poll meanwhile, finding the approval consumed,
-- its execution unfinished and no live lease, answered outcome_unknown
-- for an execution under way. The transaction that commits
-- execution_started now extends the execution's own lease to cover the
-- effect's deadline and the end's transaction; the runtime may change a
-- lease's expiry, and nothing else of it.

-- +goose Up
GRANT UPDATE (expires_at) ON orangerail.budget_leases TO orangerail_runtime;

-- +goose Down
REVOKE UPDATE (expires_at) ON orangerail.budget_leases FROM orangerail_runtime;
