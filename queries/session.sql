-- name: SessionAssumeRuntime :exec
-- Every pooled connection of the server acts as orangerail_runtime
-- (the SQL spelling of SET ROLE).
SELECT set_config('role', 'orangerail_runtime', false);

-- name: TenantScope :exec
-- Scopes the current transaction to one tenant; Row Level Security and
-- audit_append read it.
SELECT set_config('orangerail.tenant_id', @tenant_id::text, true);
