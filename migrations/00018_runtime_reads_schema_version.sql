-- The server checks the schema's version when it starts (database.CheckCurrent),
-- logged in as a member of orangerail_runtime. Behind a pooler in transaction
-- mode (PgBouncer) that check may run on a server connection that a replica
-- left acting as orangerail_runtime itself: the role may read the version
-- table, never write it.

-- +goose Up
GRANT SELECT ON orangerail_schema_version TO orangerail_runtime;

-- +goose Down
REVOKE SELECT ON orangerail_schema_version FROM orangerail_runtime;
