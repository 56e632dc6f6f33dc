-- name: SessionAssumeRuntime :exec
-- Every pooled connection of the server acts as orangerail_runtime
-- (the SQL spelling of SET ROLE).
SELECT set_config('role', 'orangerail_runtime', false);
