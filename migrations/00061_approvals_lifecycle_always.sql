-- The approval lifecycle trigger fires ALWAYS again. 00001 made it, like
-- the audit log's triggers, ENABLE ALWAYS, so that a session in
-- replication-role replica (which skips ordinary triggers: a superuser's,
-- a restore's, a logical replication apply) is held to it too; 00043
-- turned it off for its backfill and back on with a plain ENABLE TRIGGER,
-- which fires in origin mode only: from then on such a session could
-- rewrite an approval's staged call (its input, its expiry) or move it
-- backwards, and nothing in the database refused it.

-- +goose Up
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_lifecycle;

-- +goose Down
ALTER TABLE orangerail.approvals ENABLE TRIGGER approvals_lifecycle;
