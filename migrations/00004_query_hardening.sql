-- Hardening of the read-only SQL tool's door into the database.
--
-- 1. An agent's SQL runs as orangerail_query_agent, a NOLOGIN role the
--    query login switches to (SET LOCAL ROLE) before any agent SQL. Postgres
--    lets a backend signal (pg_terminate_backend, pg_cancel_backend) the
--    backends whose login role the *current* user has the privileges of;
--    every tenant's query logs in as orangerail_query, so as that role one
--    tenant's query could end another's. orangerail_query_agent is a member
--    of orangerail_readonly only — never of orangerail_query — so it has the
--    privileges of no login any backend runs as, and signals nothing. The
--    read policies name orangerail_readonly and so still apply.
-- 2. Built-ins that signal backends, take advisory locks, report sizes or
--    read the server's files are not executable by PUBLIC. Every overload
--    in pg_catalog is found in pg_proc, not listed by hand; only those
--    PUBLIC could execute are changed, and each is recorded so that Down
--    restores exactly what Up took.
-- 3. The query login's memory for sorts and hashes (work_mem) and its temp
--    files (temp_file_limit) are bounded.

-- +goose Up
-- Roles are cluster-wide and several databases may be migrated at once:
-- creation tolerates a twin. The membership of orangerail_query is made
-- with the role (ROLE clause), in the same statement.
-- +goose StatementBegin
DO $role$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'orangerail_query_agent') THEN
        BEGIN
            CREATE ROLE orangerail_query_agent NOLOGIN INHERIT NOCREATEDB NOCREATEROLE NOBYPASSRLS
                IN ROLE orangerail_readonly ROLE orangerail_query;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created meanwhile by a migration of another database
        END;
    END IF;
END
$role$;
-- +goose StatementEnd

-- What Up revoked from PUBLIC, by signature, for Down to give back.
CREATE TABLE orangerail.query_revoked_functions (
    signature text PRIMARY KEY
);
REVOKE ALL ON orangerail.query_revoked_functions FROM PUBLIC;

-- Revoking needs the built-ins' owner (a superuser); a migration run by
-- another owner keeps going and says so, as 00003 does.
-- +goose StatementBegin
DO $revoke$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace
          AND (p.proname IN ('pg_terminate_backend', 'pg_cancel_backend',
                             'pg_relation_size', 'pg_total_relation_size', 'pg_table_size', 'pg_indexes_size',
                             'pg_database_size', 'pg_tablespace_size',
                             'pg_stat_file', 'pg_read_file', 'pg_read_binary_file')
               OR p.proname LIKE 'pg\_%advisory%'
               OR p.proname LIKE 'pg\_ls\_%')
          -- A NULL ACL is the default: EXECUTE for PUBLIC.
          AND (p.proacl IS NULL OR EXISTS (
                SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))
        ORDER BY 1
    LOOP
        BEGIN
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO orangerail_runtime, orangerail_auditor, %I', f, current_user);
            INSERT INTO orangerail.query_revoked_functions (signature) VALUES (f::text);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'could not revoke EXECUTE on % from PUBLIC: %', f, SQLERRM;
        END;
    END LOOP;
END
$revoke$;
-- +goose StatementEnd

-- Role settings are cluster-wide and need a superuser (temp_file_limit is
-- superuser-only); each is set only when it differs, so concurrent
-- migrations of several databases rarely write the same row.
-- +goose StatementBegin
DO $limits$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['work_mem=4MB', 'temp_file_limit=256MB'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting d
                       WHERE d.setrole = 'orangerail_query'::regrole AND d.setdatabase = 0 AND s = ANY (d.setconfig)) THEN
            EXECUTE format('ALTER ROLE orangerail_query SET %I = %L', split_part(s, '=', 1), split_part(s, '=', 2));
        END IF;
    END LOOP;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'could not bound orangerail_query''s memory: %; run as a superuser: ALTER ROLE orangerail_query SET work_mem = ''4MB''; ALTER ROLE orangerail_query SET temp_file_limit = ''256MB''', SQLERRM;
END
$limits$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $restore$
DECLARE
    f text;
BEGIN
    FOR f IN SELECT signature FROM orangerail.query_revoked_functions LOOP
        BEGIN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM orangerail_runtime, orangerail_auditor', f);
        EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
            NULL;
        END;
    END LOOP;
END
$restore$;
-- +goose StatementEnd
DROP TABLE orangerail.query_revoked_functions;
-- orangerail_query_agent and orangerail_query's settings stay: roles and
-- their settings are shared by the cluster's databases.
