-- A query backend is bound to one query at a time.
--
-- sql_query binds the backend its connection reached (its pid and start
-- time) to the caller's tenant, and Row Level Security shows the query
-- role the rows of the tenant bound to the backend its statement runs on.
-- query_session_bind rebound a backend bound already, to whichever tenant
-- asked last. Where the query login's URL leads through a pooler that
-- pools by transaction (against README's advice), two queries reach one
-- backend: the second rebound it to its tenant, and the first's statement
-- then read the second tenant's rows; the first's unbind left the
-- second's statement reading none, a silent empty answer.
--
-- A backend bound already is now refused, ORA08, so a backend serves one
-- query; and the Querier checks its statement's transaction runs on the
-- backend it bound (sqlquery.BackendError). A direct connection, a fresh
-- backend for every query, is never bound before.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.query_session_bind(p_pid integer, p_tenant text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    started timestamptz;
BEGIN
    SELECT a.backend_start INTO started FROM pg_stat_activity a
        WHERE a.pid = p_pid AND a.usename = 'orangerail_query';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no orangerail_query backend with pid %', p_pid USING ERRCODE = 'ORA03';
    END IF;
    DELETE FROM orangerail.query_sessions WHERE bound_at < now() - interval '1 hour';
    INSERT INTO orangerail.query_sessions (pid, backend_start, tenant_id) VALUES (p_pid, started, p_tenant)
        ON CONFLICT (pid, backend_start) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the orangerail_query backend with pid % is bound to another query already: its connection is pooled', p_pid
            USING ERRCODE = 'ORA08';
    END IF;
    RETURN started;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.query_session_bind(p_pid integer, p_tenant text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    started timestamptz;
BEGIN
    SELECT a.backend_start INTO started FROM pg_stat_activity a
        WHERE a.pid = p_pid AND a.usename = 'orangerail_query';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no orangerail_query backend with pid %', p_pid USING ERRCODE = 'ORA03';
    END IF;
    DELETE FROM orangerail.query_sessions WHERE bound_at < now() - interval '1 hour';
    INSERT INTO orangerail.query_sessions (pid, backend_start, tenant_id) VALUES (p_pid, started, p_tenant)
        ON CONFLICT (pid, backend_start) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, bound_at = now();
    RETURN started;
END
$fn$;
-- +goose StatementEnd
