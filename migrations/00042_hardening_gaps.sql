-- Migrations 00003 and 00004 take side-effect built-ins (pg_sleep,
-- set_config, the advisory locks, pg_terminate_backend, the file readers
-- ...) from PUBLIC and bound the query login, the read-only SQL tool's
-- database-level layer. Both need a superuser. Run by a schema owner that
-- is none, they said what they skipped only in NOTICEs no client showed —
-- and a REVOKE by a non-owner of a function only warns, so 00004 recorded
-- as revoked what it never was. hardening_gaps lists what is missing now,
-- read from the catalog, each with the statement a superuser runs to close
-- it; `orangerail migrate up` and `migrate status` print them.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.hardening_gaps()
RETURNS TABLE (gap text, fix text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH owner AS (
        SELECT n.nspowner::regrole::text AS name FROM pg_catalog.pg_namespace n WHERE n.nspname = 'orangerail'
    ), builtins AS (
        SELECT p.oid::regprocedure::text AS f
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace
          AND (p.oid::regprocedure::text IN (
                   'set_config(text,text,boolean)', 'pg_sleep(double precision)', 'pg_sleep_for(interval)',
                   'pg_sleep_until(timestamp with time zone)', 'pg_notify(text,text)', 'nextval(regclass)',
                   'setval(regclass,bigint)', 'query_to_xml(text,boolean,boolean,text)',
                   'query_to_xmlschema(text,boolean,boolean,text)', 'query_to_xml_and_xmlschema(text,boolean,boolean,text)',
                   'ts_stat(text)', 'ts_stat(text,text)', 'ts_rewrite(tsquery,text)')
               OR p.proname IN ('pg_terminate_backend', 'pg_cancel_backend',
                                'pg_relation_size', 'pg_total_relation_size', 'pg_table_size', 'pg_indexes_size',
                                'pg_database_size', 'pg_tablespace_size',
                                'pg_stat_file', 'pg_read_file', 'pg_read_binary_file')
               OR p.proname LIKE 'pg\_%advisory%'
               OR p.proname LIKE 'pg\_ls\_%')
          -- A NULL ACL is the default: EXECUTE for PUBLIC.
          AND (p.proacl IS NULL OR EXISTS (
                SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))
    ), settings AS (
        SELECT s FROM unnest(ARRAY['track_activities=off', 'work_mem=4MB', 'temp_file_limit=256MB']) s
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting d
                          WHERE d.setrole = 'orangerail_query'::regrole AND d.setdatabase = 0 AND s = ANY (d.setconfig))
    )
    SELECT format('PUBLIC may execute pg_catalog.%s', b.f),
           format('REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM PUBLIC; GRANT EXECUTE ON FUNCTION pg_catalog.%s TO orangerail_runtime, orangerail_auditor, %s;',
                  b.f, b.f, owner.name)
    FROM builtins b, owner
    UNION ALL
    SELECT format('orangerail_query lacks %s', s.s),
           format('ALTER ROLE orangerail_query SET %s = %L;', split_part(s.s, '=', 1), split_part(s.s, '=', 2))
    FROM settings s
    UNION ALL
    SELECT 'orangerail_query may hold any number of connections', 'ALTER ROLE orangerail_query CONNECTION LIMIT 32;'
    FROM pg_catalog.pg_roles r WHERE r.rolname = 'orangerail_query' AND r.rolconnlimit < 0
    ORDER BY 1
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.hardening_gaps() FROM PUBLIC;

-- +goose Down
DROP FUNCTION orangerail.hardening_gaps();
