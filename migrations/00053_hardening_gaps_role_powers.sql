-- hardening_gaps also lists an orangerail role, or a login reading as an
-- auditor (a member of orangerail_auditor, directly or through a group),
-- that holds a power which undoes the isolation the schema
-- builds: SUPERUSER or BYPASSRLS (Row Level Security, which keeps each
-- tenant's rows apart, no longer applies to it), or membership of
-- pg_read_all_data or pg_write_all_data (every table of the database,
-- orangerail's own and the datasource's beside its objects). The
-- migrations create a role only where none exists, so one an operator
-- made beforehand kept what it had, and nothing said so; `auditor grant`
-- refuses such a login, and one made by hand is listed here.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.role_power_gaps(p_role text)
RETURNS TABLE (gap text, fix text)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT format('%I is a superuser: no Row Level Security applies to it', r.rolname),
           format('ALTER ROLE %I NOSUPERUSER;', r.rolname)
    FROM pg_catalog.pg_roles r WHERE r.rolname = p_role AND r.rolsuper
    UNION ALL
    SELECT format('%I bypasses Row Level Security (BYPASSRLS): it reads every tenant', r.rolname),
           format('ALTER ROLE %I NOBYPASSRLS;', r.rolname)
    FROM pg_catalog.pg_roles r WHERE r.rolname = p_role AND r.rolbypassrls
    UNION ALL
    -- A superuser is a member of every role: said above.
    SELECT format('%I is a member of %s: it reaches every table of the database', r.rolname, b.power),
           format('REVOKE %s FROM %I; -- or from the role it is a member through', b.power, r.rolname)
    FROM pg_catalog.pg_roles r, unnest(ARRAY['pg_read_all_data', 'pg_write_all_data']) b(power)
    WHERE r.rolname = p_role AND NOT r.rolsuper
      AND EXISTS (SELECT FROM pg_catalog.pg_roles p WHERE p.rolname = b.power)
      AND pg_catalog.pg_has_role(r.oid, b.power, 'MEMBER')
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.role_power_gaps(text) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.hardening_gaps()
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
    UNION ALL
    -- The roles orangerail made, and the logins reading as an auditor,
    -- directly or through a group (not every superuser, whom pg_has_role
    -- calls a member of every role).
    SELECT p.gap, p.fix
    FROM pg_catalog.pg_roles r
    CROSS JOIN LATERAL orangerail.role_power_gaps(r.rolname::text) p
    WHERE r.rolname IN ('orangerail_runtime', 'orangerail_auditor', 'orangerail_readonly', 'orangerail_query', 'orangerail_query_agent')
       OR (r.rolcanlogin AND r.oid IN (
            WITH RECURSIVE members(oid) AS (
                SELECT m.member FROM pg_catalog.pg_auth_members m WHERE m.roleid = 'orangerail_auditor'::regrole
                UNION
                SELECT m.member FROM pg_catalog.pg_auth_members m JOIN members ON m.roleid = members.oid
            )
            SELECT oid FROM members))
    ORDER BY 1
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.hardening_gaps()
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

DROP FUNCTION orangerail.role_power_gaps(text);
