-- Sessions of the approvers' web desk. They live here, not in a process,
-- so every replica serves the same sign-in, and signing out (or an
-- operator's revocation) takes effect everywhere at once. The row keys on
-- a SHA-256 of the session id: a copy of this table (a backup, a replica)
-- hands out no usable cookie.

-- +goose Up
CREATE TABLE orangerail.desk_sessions (
    id_hash     bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    tenant_id   text NOT NULL,
    subject     text NOT NULL,
    issuer      text NOT NULL,
    -- The person's verified claims as identity.Resolver mapped them
    -- (roles, kind, name), re-read on every request.
    caller      jsonb NOT NULL,
    -- The form token every POST of this session must carry.
    form_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX desk_sessions_expires_at ON orangerail.desk_sessions (expires_at);
CREATE INDEX desk_sessions_subject ON orangerail.desk_sessions (issuer, subject);

REVOKE ALL ON orangerail.desk_sessions FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON orangerail.desk_sessions TO orangerail_runtime;

-- +goose Down
DROP TABLE orangerail.desk_sessions;
