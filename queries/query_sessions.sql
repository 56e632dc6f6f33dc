-- name: QuerySessionBind :one
-- Binds a backend of orangerail_query to a tenant, before its agent SQL
-- runs, and returns the backend's start time, which names the binding.
SELECT orangerail.query_session_bind(@pid::integer, @tenant_id::text)::timestamptz AS backend_start;

-- name: QuerySessionUnbind :exec
SELECT orangerail.query_session_unbind(@pid::integer, @backend_start::timestamptz);
