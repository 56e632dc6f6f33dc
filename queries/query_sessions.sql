-- name: QuerySessionBind :exec
-- Binds a backend of orangerail_query to a tenant, before its agent SQL runs.
SELECT orangerail.query_session_bind(@pid::integer, @tenant_id::text);

-- name: QuerySessionUnbind :exec
SELECT orangerail.query_session_unbind(@pid::integer);
