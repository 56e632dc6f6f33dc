-- An auditor login runs `orangerail audit verify` (the Go verifier, signed
-- checkpoints and all) with its own rights: the CLI checks the schema's
-- version before it reads anything, as every command does, so the login
-- may read the version table. It holds migration numbers and times, no
-- tenant's data; the role may never write it.

-- +goose Up
GRANT SELECT ON orangerail_schema_version TO orangerail_auditor;

-- +goose Down
REVOKE SELECT ON orangerail_schema_version FROM orangerail_auditor;
