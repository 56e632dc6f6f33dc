-- An execution's end and an operator's settle of it wait on a row no
-- auditor may lock, not on an advisory lock.
--
-- 00063 made every record that finishes an execution (execution_succeeded,
-- execution_failed, execution_settled) take, as it is inserted, the lock
-- a settle holds from before it reads the execution unfinished
-- (AuditSettleLock): pg_advisory_xact_lock keyed on the tenant and the
-- correlation id, both of which an auditor of the tenant reads in its
-- audit. Where the migrations ran as a login that is no superuser, the
-- advisory-lock built-ins stay executable by orangerail_auditor (00055
-- only warns; hardening_gaps named this lock, 00066), so an auditor login
-- could hold an execution's settle lock for as long as its session
-- lasted: the execution's end record failed on the lock timeout (the
-- agent told outcome_unknown of an effect that took place), and every
-- settle of it did too.
--
-- The lock is now the execution's row of orangerail.settle_locks, one per
-- tenant and correlation id, locked FOR UPDATE through settle_lock, which
-- only orangerail_runtime (and the owner) may execute, as 00065's
-- coordination_lock is. No other role holds any privilege on the table,
-- and every row lock needs UPDATE on it, so no auditor can hold what an
-- end or a settle waits on. A row per execution, not one per tenant as
-- coordination_locks has: only an execution's own end and its settles
-- wait on each other, never two executions (the advisory lock's keys were
-- as narrow). The row's first insert is itself the lock (another insert
-- of it waits for that transaction), so two first takers serialize too.
-- The rows stay, one per correlation id that ever recorded an end or was
-- settled, as small as a key: deleting one would let a taker that waited
-- on it lock nothing.
--
-- What 00063 guarantees is kept: an end after a settle is refused ORA10,
-- and a settle and an end never both stand. hardening_gaps no longer
-- names a lock of the server's: the server takes no advisory lock; the
-- operator's migrate and auditor grants still do.

-- +goose Up
CREATE TABLE orangerail.settle_locks (
    tenant_id      text NOT NULL,
    correlation_id text NOT NULL,
    PRIMARY KEY (tenant_id, correlation_id)
);
REVOKE ALL ON orangerail.settle_locks FROM PUBLIC;

-- +goose StatementBegin
CREATE FUNCTION orangerail.settle_lock(p_tenant text, p_correlation text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- Waits (within the lock timeout) for whoever holds it: another's
    -- insert of the row not yet committed, or its lock of the row.
    INSERT INTO orangerail.settle_locks (tenant_id, correlation_id) VALUES (p_tenant, p_correlation)
    ON CONFLICT (tenant_id, correlation_id) DO NOTHING;
    PERFORM FROM orangerail.settle_locks l WHERE l.tenant_id = p_tenant AND l.correlation_id = p_correlation FOR UPDATE;
END
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.settle_lock(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.settle_lock(text, text) TO orangerail_runtime;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_end_after_settle() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NEW.phase IN ('execution_succeeded', 'execution_failed', 'execution_settled') THEN
        PERFORM orangerail.settle_lock(NEW.tenant_id, NEW.correlation_id);
        IF NEW.phase <> 'execution_settled' AND EXISTS (
            SELECT FROM orangerail.audit s
            WHERE s.tenant_id = NEW.tenant_id AND s.correlation_id = NEW.correlation_id AND s.phase = 'execution_settled'
              AND NOT EXISTS (
                  SELECT FROM orangerail.audit r
                  WHERE r.tenant_id = s.tenant_id AND r.correlation_id = s.correlation_id AND r.phase = 'execution_started'
                    AND (coalesce(r.seq, 9223372036854775807), r.id) > (coalesce(s.seq, 9223372036854775807), s.id))) THEN
            RAISE EXCEPTION 'execution % of tenant % was settled by an operator: its own end (%) is not recorded beside the settle',
                NEW.correlation_id, NEW.tenant_id, NEW.phase USING ERRCODE = 'ORA10';
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

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
    SELECT format('orangerail_auditor may execute pg_catalog.%s, one of the server''s locks, notifications and sequences or a write a read-only transaction still makes, which an auditor never needs (the server takes no advisory lock, but holding one an auditor login stalls an operator''s `orangerail migrate` and grant or revoke of an auditor login, both of which wait on one)', b.f),
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
CREATE OR REPLACE FUNCTION orangerail.audit_end_after_settle() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NEW.phase IN ('execution_succeeded', 'execution_failed', 'execution_settled') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('orangerail.settle:' || NEW.tenant_id || ':' || NEW.correlation_id, 0));
        IF NEW.phase <> 'execution_settled' AND EXISTS (
            SELECT FROM orangerail.audit s
            WHERE s.tenant_id = NEW.tenant_id AND s.correlation_id = NEW.correlation_id AND s.phase = 'execution_settled'
              AND NOT EXISTS (
                  SELECT FROM orangerail.audit r
                  WHERE r.tenant_id = s.tenant_id AND r.correlation_id = s.correlation_id AND r.phase = 'execution_started'
                    AND (coalesce(r.seq, 9223372036854775807), r.id) > (coalesce(s.seq, 9223372036854775807), s.id))) THEN
            RAISE EXCEPTION 'execution % of tenant % was settled by an operator: its own end (%) is not recorded beside the settle',
                NEW.correlation_id, NEW.tenant_id, NEW.phase USING ERRCODE = 'ORA10';
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

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
DROP FUNCTION orangerail.settle_lock(text, text);
DROP TABLE orangerail.settle_locks;
