-- name: SessionAssumeRuntime :exec
-- Every pooled connection of the server acts as orangerail_runtime
-- (the SQL spelling of SET ROLE).
SELECT set_config('role', 'orangerail_runtime', false);

-- name: SessionOperator :one
-- Who the connection logged in as, whether it acts with that login's own
-- rights (no SET ROLE), and whether that login owns the orangerail schema
-- or is a superuser: what a break-glass decision needs.
SELECT session_user::text AS login, (current_user = session_user)::boolean AS own_rights,
       EXISTS (
           SELECT FROM pg_catalog.pg_roles r, pg_catalog.pg_namespace n
           WHERE r.rolname = session_user AND n.nspname = 'orangerail'
             AND (r.rolsuper OR r.oid = n.nspowner))::boolean AS owner;

-- name: SessionLoginBypassesRLS :one
-- Whether the login (not the role it set) may bypass Row Level Security:
-- a superuser, or a role with BYPASSRLS.
SELECT coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)::boolean AS bypasses;

-- name: SessionActAsLogin :exec
-- For the rest of the transaction, act with the login's own rights, not
-- the role the session set (the SQL spelling of SET LOCAL ROLE NONE).
SELECT set_config('role', 'none', true);

-- name: SessionActsAsAuditor :one
-- Whether the connection acts as an auditor login: a member of
-- orangerail_auditor that does not act as orangerail_runtime (a runtime
-- pool's connections SET ROLE to it; a superuser is a member of both).
SELECT (pg_catalog.pg_has_role(current_user, 'orangerail_auditor', 'MEMBER')
        AND NOT pg_catalog.pg_has_role(current_user, 'orangerail_runtime', 'MEMBER'))::boolean AS auditor;
