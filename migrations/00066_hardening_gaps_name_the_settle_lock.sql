-- hardening_gaps names the harm an auditor granted an advisory lock can
-- still do.
--
-- It said an auditor login holding one stalls any tenant's checkpoint
-- signing and sweep: since 00065 both lock rows of coordination_locks
-- instead, which no auditor may lock. The one advisory lock the server
-- still takes is the settle lock ('orangerail.settle:TENANT:CORRELATION',
-- AuditSettleLock and 00063's audit_end_after_settle trigger): every
-- record that ends an execution waits on it, as an operator's settle
-- does, so an auditor holding it for an execution it reads (its tenant's
-- audit names the correlation id) holds back that execution's end record,
-- which fails when the lock timeout runs out, and the settle. The gap now
-- says so.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.hardening_gaps()
RETURNS TABLE (gap text, fix text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH owner AS (
        SELECT n.nspowner::regrole::text AS name FROM pg_catalog.pg_namespace n WHERE n.nspname = 'orangerail'
    ), builtins AS (
        SELECT p.oid::regprocedure::text AS f,
               -- The server's coordination (its locks, notifications and
               -- sequences) and the writes a read-only transaction still
               -- makes (a logical message, large objects): an auditor, who
               -- reads, is granted none.
               p.proname LIKE 'pg\_%advisory%' OR p.oid::regprocedure::text IN ('pg_notify(text,text)', 'nextval(regclass)', 'setval(regclass,bigint)')
                   OR p.proname IN ('pg_logical_emit_message', 'pg_lock_status', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_put', 'lowrite',
                                    'lo_truncate', 'lo_truncate64', 'lo_unlink', 'lo_import', 'lo_export') AS coordination,
               -- A NULL ACL is the default: EXECUTE for PUBLIC.
               p.proacl IS NULL OR EXISTS (
                   SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public,
               EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a
                       WHERE a.grantee = 'orangerail_auditor'::regrole AND a.privilege_type = 'EXECUTE') AS auditor
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
               OR p.proname LIKE 'pg\_ls\_%'
               OR p.proname IN ('pg_logical_emit_message', 'pg_lock_status', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_put', 'lowrite',
                                'lo_truncate', 'lo_truncate64', 'lo_unlink', 'lo_import', 'lo_export'))
    ), settings AS (
        SELECT s FROM unnest(ARRAY['track_activities=off', 'work_mem=4MB', 'temp_file_limit=256MB']) s
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting d
                          WHERE d.setrole = 'orangerail_query'::regrole AND d.setdatabase = 0 AND s = ANY (d.setconfig))
    )
    SELECT format('PUBLIC may execute pg_catalog.%s', b.f),
           format('REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM PUBLIC; GRANT EXECUTE ON FUNCTION pg_catalog.%s TO orangerail_runtime, %s%s;',
                  b.f, b.f, CASE WHEN b.coordination THEN '' ELSE 'orangerail_auditor, ' END, owner.name)
    FROM builtins b, owner
    WHERE b.public
    UNION ALL
    SELECT format('orangerail_auditor may execute pg_catalog.%s, one of the server''s locks, notifications and sequences or a write a read-only transaction still makes, which an auditor never needs (holding the settle lock of an execution it reads, an auditor login stalls that execution''s end record and an operator''s settle of it, both waiting on it: the one advisory lock the server still takes)', b.f),
           format('REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM orangerail_auditor;', b.f)
    FROM builtins b
    WHERE b.coordination AND b.auditor
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
        SELECT p.oid::regprocedure::text AS f,
               -- The server's coordination (its locks, notifications and
               -- sequences) and the writes a read-only transaction still
               -- makes (a logical message, large objects): an auditor, who
               -- reads, is granted none.
               p.proname LIKE 'pg\_%advisory%' OR p.oid::regprocedure::text IN ('pg_notify(text,text)', 'nextval(regclass)', 'setval(regclass,bigint)')
                   OR p.proname IN ('pg_logical_emit_message', 'pg_lock_status', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_put', 'lowrite',
                                    'lo_truncate', 'lo_truncate64', 'lo_unlink', 'lo_import', 'lo_export') AS coordination,
               -- A NULL ACL is the default: EXECUTE for PUBLIC.
               p.proacl IS NULL OR EXISTS (
                   SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public,
               EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a
                       WHERE a.grantee = 'orangerail_auditor'::regrole AND a.privilege_type = 'EXECUTE') AS auditor
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
               OR p.proname LIKE 'pg\_ls\_%'
               OR p.proname IN ('pg_logical_emit_message', 'pg_lock_status', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_put', 'lowrite',
                                'lo_truncate', 'lo_truncate64', 'lo_unlink', 'lo_import', 'lo_export'))
    ), settings AS (
        SELECT s FROM unnest(ARRAY['track_activities=off', 'work_mem=4MB', 'temp_file_limit=256MB']) s
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting d
                          WHERE d.setrole = 'orangerail_query'::regrole AND d.setdatabase = 0 AND s = ANY (d.setconfig))
    )
    SELECT format('PUBLIC may execute pg_catalog.%s', b.f),
           format('REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM PUBLIC; GRANT EXECUTE ON FUNCTION pg_catalog.%s TO orangerail_runtime, %s%s;',
                  b.f, b.f, CASE WHEN b.coordination THEN '' ELSE 'orangerail_auditor, ' END, owner.name)
    FROM builtins b, owner
    WHERE b.public
    UNION ALL
    SELECT format('orangerail_auditor may execute pg_catalog.%s, one of the server''s locks, notifications and sequences or a write a read-only transaction still makes, which an auditor never needs (holding a lock, an auditor login stalls any tenant''s checkpoint signing and sweep)', b.f),
           format('REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM orangerail_auditor;', b.f)
    FROM builtins b
    WHERE b.coordination AND b.auditor
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
