-- The read-only SQL tool's door into the database: a dedicated LOGIN role
-- with the rights of orangerail_readonly and nothing else, whose tenant is
-- bound to its backend by the server before any agent SQL runs.
--
-- Tenant isolation for this role does not rest on a setting SQL can change:
-- the binding lives in orangerail.query_sessions, keyed by the backend's pid
-- and start time, and only the runtime (through query_session_bind) writes
-- it. The functions a read-only query must never call are also not
-- executable by PUBLIC here, where Postgres allows revoking them.

-- +goose Up
-- +goose StatementBegin
DO $role$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'orangerail_query') THEN
        BEGIN
            CREATE ROLE orangerail_query LOGIN INHERIT NOCREATEDB NOCREATEROLE NOBYPASSRLS IN ROLE orangerail_readonly;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created meanwhile by a migration of another database
        END;
    END IF;
END
$role$;
-- +goose StatementEnd

CREATE TABLE orangerail.query_sessions (
    pid           integer     NOT NULL,
    backend_start timestamptz NOT NULL,
    tenant_id     text        NOT NULL,
    bound_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pid, backend_start)
);
REVOKE ALL ON orangerail.query_sessions FROM PUBLIC;

-- query_session_bind binds a backend (of the query role) to a tenant.
-- +goose StatementBegin
CREATE FUNCTION orangerail.query_session_bind(p_pid integer, p_tenant text) RETURNS timestamptz
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

-- query_session_unbind forgets one binding: the backend's pid and start
-- time, so a pid reused by another backend keeps its own binding.
-- +goose StatementBegin
CREATE FUNCTION orangerail.query_session_unbind(p_pid integer, p_started timestamptz) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    DELETE FROM orangerail.query_sessions WHERE pid = p_pid AND backend_start = p_started;
$fn$;
-- +goose StatementEnd

-- query_session_tenant is the tenant bound to the calling backend, or NULL.
-- +goose StatementBegin
CREATE FUNCTION orangerail.query_session_tenant() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT q.tenant_id FROM orangerail.query_sessions q
    JOIN pg_stat_activity a ON a.pid = q.pid AND a.backend_start = q.backend_start
    WHERE q.pid = pg_backend_pid();
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.query_session_bind(integer, text), orangerail.query_session_unbind(integer, timestamptz),
    orangerail.query_session_tenant() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.query_session_bind(integer, text), orangerail.query_session_unbind(integer, timestamptz)
    TO orangerail_runtime;
GRANT EXECUTE ON FUNCTION orangerail.query_session_tenant() TO orangerail_readonly;

-- The read-only role sees the tenant bound to its backend; auditors keep
-- seeing the tenants granted to their login.
DROP POLICY approvals_auditor ON orangerail.approvals;
DROP POLICY audit_auditor ON orangerail.audit;
DROP POLICY audit_heads_auditor ON orangerail.audit_heads;
CREATE POLICY approvals_auditor ON orangerail.approvals FOR SELECT TO orangerail_auditor
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_auditor ON orangerail.audit FOR SELECT TO orangerail_auditor
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_heads_auditor ON orangerail.audit_heads FOR SELECT TO orangerail_auditor
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY approvals_query ON orangerail.approvals FOR SELECT TO orangerail_readonly
    USING (tenant_id = (SELECT orangerail.query_session_tenant()));
CREATE POLICY audit_query ON orangerail.audit FOR SELECT TO orangerail_readonly
    USING (tenant_id = (SELECT orangerail.query_session_tenant()));
CREATE POLICY audit_heads_query ON orangerail.audit_heads FOR SELECT TO orangerail_readonly
    USING (tenant_id = (SELECT orangerail.query_session_tenant()));

-- The query role's statements are not tracked in pg_stat_activity, where
-- other sessions of the same role (another tenant's query) could read their
-- text; and it holds a bounded number of connections. Both need a
-- superuser; a migration run by another owner keeps going and says so.
-- +goose StatementBegin
DO $quiet$
BEGIN
    ALTER ROLE orangerail_query SET track_activities = off;
    ALTER ROLE orangerail_query CONNECTION LIMIT 32;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'could not configure orangerail_query: %; run as a superuser: ALTER ROLE orangerail_query SET track_activities = off', SQLERRM;
END
$quiet$;
-- +goose StatementEnd

-- Side-effect built-ins: executable by the runtime and the owner only.
-- Revoking needs the built-ins' owner (a superuser); a migration run by
-- another owner keeps going and says so.
-- +goose StatementBegin
DO $revoke$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'pg_catalog.set_config(text, text, boolean)',
        'pg_catalog.pg_sleep(double precision)',
        'pg_catalog.pg_sleep_for(interval)',
        'pg_catalog.pg_sleep_until(timestamp with time zone)',
        'pg_catalog.pg_advisory_lock(bigint)',
        'pg_catalog.pg_advisory_lock(integer, integer)',
        'pg_catalog.pg_advisory_lock_shared(bigint)',
        'pg_catalog.pg_advisory_xact_lock(bigint)',
        'pg_catalog.pg_advisory_xact_lock(integer, integer)',
        'pg_catalog.pg_try_advisory_lock(bigint)',
        'pg_catalog.pg_try_advisory_lock(integer, integer)',
        'pg_catalog.pg_try_advisory_xact_lock(bigint)',
        'pg_catalog.pg_advisory_unlock(bigint)',
        'pg_catalog.pg_advisory_unlock_all()',
        'pg_catalog.pg_notify(text, text)',
        'pg_catalog.nextval(regclass)',
        'pg_catalog.setval(regclass, bigint)',
        'pg_catalog.query_to_xml(text, boolean, boolean, text)',
        'pg_catalog.query_to_xmlschema(text, boolean, boolean, text)',
        'pg_catalog.query_to_xml_and_xmlschema(text, boolean, boolean, text)',
        'pg_catalog.ts_stat(text)',
        'pg_catalog.ts_stat(text, text)',
        'pg_catalog.ts_rewrite(tsquery, text)'
    ] LOOP
        BEGIN
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO orangerail_runtime, orangerail_auditor, %I', f, current_user);
        EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
            RAISE NOTICE 'could not revoke EXECUTE on % from PUBLIC: %', f, SQLERRM;
        END;
    END LOOP;
END
$revoke$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $restore$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'pg_catalog.set_config(text, text, boolean)', 'pg_catalog.pg_sleep(double precision)',
        'pg_catalog.pg_sleep_for(interval)', 'pg_catalog.pg_sleep_until(timestamp with time zone)',
        'pg_catalog.pg_advisory_lock(bigint)', 'pg_catalog.pg_advisory_lock(integer, integer)',
        'pg_catalog.pg_advisory_lock_shared(bigint)', 'pg_catalog.pg_advisory_xact_lock(bigint)',
        'pg_catalog.pg_advisory_xact_lock(integer, integer)', 'pg_catalog.pg_try_advisory_lock(bigint)',
        'pg_catalog.pg_try_advisory_lock(integer, integer)', 'pg_catalog.pg_try_advisory_xact_lock(bigint)',
        'pg_catalog.pg_advisory_unlock(bigint)', 'pg_catalog.pg_advisory_unlock_all()', 'pg_catalog.pg_notify(text, text)',
        'pg_catalog.nextval(regclass)', 'pg_catalog.setval(regclass, bigint)',
        'pg_catalog.query_to_xml(text, boolean, boolean, text)', 'pg_catalog.query_to_xmlschema(text, boolean, boolean, text)',
        'pg_catalog.query_to_xml_and_xmlschema(text, boolean, boolean, text)', 'pg_catalog.ts_stat(text)',
        'pg_catalog.ts_stat(text, text)', 'pg_catalog.ts_rewrite(tsquery, text)'
    ] LOOP
        BEGIN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);
        EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
            NULL;
        END;
    END LOOP;
END
$restore$;
-- +goose StatementEnd
DROP POLICY approvals_query ON orangerail.approvals;
DROP POLICY audit_query ON orangerail.audit;
DROP POLICY audit_heads_query ON orangerail.audit_heads;
DROP POLICY approvals_auditor ON orangerail.approvals;
DROP POLICY audit_auditor ON orangerail.audit;
DROP POLICY audit_heads_auditor ON orangerail.audit_heads;
CREATE POLICY approvals_auditor ON orangerail.approvals FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_auditor ON orangerail.audit FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_heads_auditor ON orangerail.audit_heads FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
DROP FUNCTION orangerail.query_session_tenant();
DROP FUNCTION orangerail.query_session_unbind(integer, timestamptz);
DROP FUNCTION orangerail.query_session_bind(integer, text);
DROP TABLE orangerail.query_sessions;
-- orangerail_query stays: roles are shared by the cluster's databases.
