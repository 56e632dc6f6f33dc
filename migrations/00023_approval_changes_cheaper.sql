-- An approval's change costs Postgres less for the same checks. Measured
-- with perf and pg_stat_statements under the lifecycle benchmark, most of
-- a governed cycle's database time is spent in these functions:
--
-- - audit_entry_columns asked three regular expressions per entry (about a
--   third of its time: Postgres' regex engine is slow for bounded
--   repetition); each is now the same test spelled with translate() and
--   length(), which accept exactly the strings the expression did. A
--   repeated member is found as orangerail.audit_verify finds it (00021):
--   with no backslash in the entry and as many colons in it as in its
--   jsonb's text, no member was dropped at any depth, so only an entry with
--   an escape or a dropped member has its members counted. Refusals, their
--   order and their messages are unchanged.
-- - An approval's record was parsed twice, once by approval_record to check
--   it describes the change and again by audit_append. audit_insert takes
--   the parsed columns; both go through it. It is not granted to anyone:
--   only functions running as the owner reach it, so columns that are not
--   the entry's own can never be written.
-- - approval_consume was a SQL function, which Postgres parses and plans
--   again at every call (a SECURITY DEFINER function is never inlined); as
--   plpgsql its statement is prepared once per session.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_entry_columns(p_entry bytea)
RETURNS orangerail.audit_columns
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc     text;
    j       jsonb;
    jt      text;
    problem text;
BEGIN
    doc := convert_from(p_entry, 'UTF8');
    j := doc::jsonb;
    -- The rules are one CASE, not an IF each: plpgsql prepares every
    -- expression anew in each transaction, and appends are one per
    -- transaction. Each shape that was a regular expression is tested by
    -- mapping its characters: [0-9] to 0 (a string with another character
    -- where a digit belongs keeps it, and differs), [a-z_] to nothing.
    problem := CASE
        WHEN jsonb_typeof(j) <> 'object' OR jsonb_typeof(j->'actor') IS DISTINCT FROM 'object'
            THEN 'is not a JSON object with an "actor" object'
        WHEN j->'v' IS DISTINCT FROM '1'::jsonb
            THEN 'version must be 1'
        WHEN jsonb_typeof(j->'tenant') IS DISTINCT FROM 'string'
            THEN 'field "tenant" must be a string'
        -- ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$
        WHEN jsonb_typeof(j->'at') IS DISTINCT FROM 'string'
          OR translate(j->>'at', '123456789', '000000000') <> '0000-00-00T00:00:00.000000Z'
            THEN 'field "at" must be an RFC 3339 UTC time with microseconds'
        -- A time Postgres would read as another (24:00:00, a leap second)
        -- is refused: the text must be the instant the column holds.
        WHEN to_char((j->>'at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> j->>'at'
            THEN 'field "at" must name the instant it spells'
        WHEN jsonb_typeof(j->'correlation_id') IS DISTINCT FROM 'string'
          OR length(j->>'correlation_id') NOT BETWEEN 1 AND 128
            THEN 'field "correlation_id" must be a string of 1 to 128 characters'
        -- ^[a-z][a-z_]{0,63}$
        WHEN jsonb_typeof(j->'phase') IS DISTINCT FROM 'string'
          OR length(j->>'phase') NOT BETWEEN 1 AND 64 OR left(j->>'phase', 1) = '_'
          OR translate(j->>'phase', 'abcdefghijklmnopqrstuvwxyz_', '') <> ''
            THEN 'field "phase" must be a lower-case name'
        WHEN j ? 'action' AND jsonb_typeof(j->'action') IS DISTINCT FROM 'string'
            THEN 'field "action" must be a string'
        WHEN jsonb_typeof(j->'actor'->'subject') IS DISTINCT FROM 'string' OR j->'actor'->>'subject' = ''
          OR jsonb_typeof(j->'actor'->'kind') IS DISTINCT FROM 'string'
          OR j->'actor'->>'kind' NOT IN ('agent', 'human', 'operator', 'system')
            THEN 'field "actor" must be {"kind": agent|human|operator|system, "subject": non-empty string}'
        WHEN jsonb_typeof(j->'dev_mode') IS DISTINCT FROM 'boolean'
            THEN 'field "dev_mode" must be a boolean'
        -- ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$
        WHEN j ? 'approval_id' AND (jsonb_typeof(j->'approval_id') IS DISTINCT FROM 'string'
          OR translate(j->>'approval_id', '123456789abcdef', '000000000000000') <> '00000000-0000-0000-0000-000000000000')
            THEN 'field "approval_id" must be a lower-case UUID'
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'audit entry %', problem USING ERRCODE = 'ORA02';
    END IF;
    -- json keeps repeated members, jsonb keeps the last. With no backslash
    -- in the entry (no escape can spell a name twice) and as many colons in
    -- it as in its jsonb's text, no member was dropped at any depth: a
    -- dropped one takes its name's colon with it, and a string's colons are
    -- the same in both. Else the members that matter are counted: equal
    -- counts mean no member repeats.
    jt := j::text;
    IF (strpos(doc, '\') <> 0
        OR length(doc) - length(replace(doc, ':', '')) <> length(jt) - length(replace(jt, ':', '')))
       AND EXISTS (
        SELECT FROM (SELECT doc::json AS d) t
        WHERE (SELECT count(*) FROM json_object_keys(t.d)) <> (SELECT count(*) FROM jsonb_object_keys(j))
           OR (SELECT count(*) FROM json_object_keys(t.d->'actor')) <> (SELECT count(*) FROM jsonb_object_keys(j->'actor'))) THEN
        RAISE EXCEPTION 'audit entry repeats a member' USING ERRCODE = 'ORA02';
    END IF;
    -- A date that does not exist (February 30th) raises 22008 here.
    RETURN ROW(j->>'tenant', (j->>'at')::timestamptz, j->>'correlation_id', j->>'phase', j->>'action',
               j->'actor'->>'subject', j->'actor'->>'kind', (j->'dev_mode')::boolean,
               (j->>'approval_id')::uuid)::orangerail.audit_columns;
END
$fn$;
-- +goose StatementEnd

-- audit_insert inserts entry, unsealed, with columns c, which the caller
-- parsed from it with audit_entry_columns, into the chain of the
-- transaction's tenant. Nobody is granted it: audit_append and
-- approval_record, running as the owner, are its only callers.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_insert(p_entry bytea, c orangerail.audit_columns) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    IF c.tenant_id <> v_tenant THEN
        RAISE EXCEPTION 'audit entry names another tenant than this transaction' USING ERRCODE = 'ORA03';
    END IF;
    -- A tenant's first record makes its head, which its sealers lock. It
    -- is read, never locked, here.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
        INSERT INTO orangerail.audit_heads (tenant_id, seq, hash)
            VALUES (v_tenant, 0, decode(repeat('00', 32), 'hex'))
            ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.audit (tenant_id, entry, at, correlation_id, phase, action,
                                  actor, actor_kind, dev_mode, approval_id)
        VALUES (v_tenant, p_entry, c.at, c.correlation_id, c.phase, c.action,
                c.actor, c.actor_kind, c.dev_mode, c.approval_id);
END
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.audit_insert(bytea, orangerail.audit_columns) FROM PUBLIC;

-- audit_append is still the only way a row enters orangerail.audit from
-- outside: it inserts one entry, unsealed, into the chain of the
-- transaction's tenant.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_append(p_entry bytea) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    -- Refused before the entry is read, as before: a transaction with no
    -- tenant writes nothing, whatever it sends.
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    PERFORM orangerail.audit_insert(p_entry, orangerail.audit_entry_columns(p_entry));
END
$fn$;
-- +goose StatementEnd

-- approval_record appends p_entry after checking that it records the
-- change: phase p_phase of approval p_id of action p_action in the
-- transaction's tenant, caused by p_actor when it is not NULL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_record(p_entry bytea, p_id uuid, p_phase text, p_action text, p_actor text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c orangerail.audit_columns := orangerail.audit_entry_columns(p_entry);
BEGIN
    IF c.phase IS DISTINCT FROM p_phase OR c.approval_id IS DISTINCT FROM p_id
       OR c.action IS DISTINCT FROM p_action OR c.tenant_id IS DISTINCT FROM orangerail.approval_tenant()
       OR (p_actor IS NOT NULL AND c.actor IS DISTINCT FROM p_actor) THEN
        RAISE EXCEPTION 'the audit record does not describe this approval change (%)', p_phase USING ERRCODE = 'ORA05';
    END IF;
    PERFORM orangerail.audit_insert(p_entry, c);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_consume(p_id uuid)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r orangerail.approvals;
BEGIN
    UPDATE orangerail.approvals a SET status = 'consumed', consumed_at = now()
        WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'approved' AND a.expires_at > now()
        RETURNING a.* INTO r;
    IF FOUND THEN
        RETURN NEXT r;
    END IF;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_entry_columns(p_entry bytea)
RETURNS orangerail.audit_columns
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc     text;
    j       jsonb;
    problem text;
BEGIN
    doc := convert_from(p_entry, 'UTF8');
    j := doc::jsonb;
    -- The rules are one CASE, not an IF each: plpgsql prepares every
    -- expression anew in each transaction, and appends are one per
    -- transaction.
    problem := CASE
        WHEN jsonb_typeof(j) <> 'object' OR jsonb_typeof(j->'actor') IS DISTINCT FROM 'object'
            THEN 'is not a JSON object with an "actor" object'
        WHEN j->'v' IS DISTINCT FROM '1'::jsonb
            THEN 'version must be 1'
        WHEN jsonb_typeof(j->'tenant') IS DISTINCT FROM 'string'
            THEN 'field "tenant" must be a string'
        WHEN jsonb_typeof(j->'at') IS DISTINCT FROM 'string'
          OR j->>'at' !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$'
            THEN 'field "at" must be an RFC 3339 UTC time with microseconds'
        -- A time Postgres would read as another (24:00:00, a leap second)
        -- is refused: the text must be the instant the column holds.
        WHEN to_char((j->>'at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> j->>'at'
            THEN 'field "at" must name the instant it spells'
        WHEN jsonb_typeof(j->'correlation_id') IS DISTINCT FROM 'string'
          OR length(j->>'correlation_id') NOT BETWEEN 1 AND 128
            THEN 'field "correlation_id" must be a string of 1 to 128 characters'
        WHEN jsonb_typeof(j->'phase') IS DISTINCT FROM 'string' OR j->>'phase' !~ '^[a-z][a-z_]{0,63}$'
            THEN 'field "phase" must be a lower-case name'
        WHEN j ? 'action' AND jsonb_typeof(j->'action') IS DISTINCT FROM 'string'
            THEN 'field "action" must be a string'
        WHEN jsonb_typeof(j->'actor'->'subject') IS DISTINCT FROM 'string' OR j->'actor'->>'subject' = ''
          OR jsonb_typeof(j->'actor'->'kind') IS DISTINCT FROM 'string'
          OR j->'actor'->>'kind' NOT IN ('agent', 'human', 'operator', 'system')
            THEN 'field "actor" must be {"kind": agent|human|operator|system, "subject": non-empty string}'
        WHEN jsonb_typeof(j->'dev_mode') IS DISTINCT FROM 'boolean'
            THEN 'field "dev_mode" must be a boolean'
        WHEN j ? 'approval_id' AND (jsonb_typeof(j->'approval_id') IS DISTINCT FROM 'string'
          OR j->>'approval_id' !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
            THEN 'field "approval_id" must be a lower-case UUID'
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'audit entry %', problem USING ERRCODE = 'ORA02';
    END IF;
    -- json keeps repeated members, jsonb keeps the last: equal counts mean
    -- no member repeats.
    IF EXISTS (
        SELECT FROM (SELECT doc::json AS d) t
        WHERE (SELECT count(*) FROM json_object_keys(t.d)) <> (SELECT count(*) FROM jsonb_object_keys(j))
           OR (SELECT count(*) FROM json_object_keys(t.d->'actor')) <> (SELECT count(*) FROM jsonb_object_keys(j->'actor'))) THEN
        RAISE EXCEPTION 'audit entry repeats a member' USING ERRCODE = 'ORA02';
    END IF;
    -- A date that does not exist (February 30th) raises 22008 here.
    RETURN ROW(j->>'tenant', (j->>'at')::timestamptz, j->>'correlation_id', j->>'phase', j->>'action',
               j->'actor'->>'subject', j->'actor'->>'kind', (j->'dev_mode')::boolean,
               (j->>'approval_id')::uuid)::orangerail.audit_columns;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_append(p_entry bytea) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
    c        orangerail.audit_columns;
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    c := orangerail.audit_entry_columns(p_entry);
    IF c.tenant_id <> v_tenant THEN
        RAISE EXCEPTION 'audit entry names another tenant than this transaction' USING ERRCODE = 'ORA03';
    END IF;
    -- A tenant's first record makes its head, which its sealers lock. It
    -- is read, never locked, here.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
        INSERT INTO orangerail.audit_heads (tenant_id, seq, hash)
            VALUES (v_tenant, 0, decode(repeat('00', 32), 'hex'))
            ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.audit (tenant_id, entry, at, correlation_id, phase, action,
                                  actor, actor_kind, dev_mode, approval_id)
        VALUES (v_tenant, p_entry, c.at, c.correlation_id, c.phase, c.action,
                c.actor, c.actor_kind, c.dev_mode, c.approval_id);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_record(p_entry bytea, p_id uuid, p_phase text, p_action text, p_actor text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c orangerail.audit_columns := orangerail.audit_entry_columns(p_entry);
BEGIN
    IF c.phase IS DISTINCT FROM p_phase OR c.approval_id IS DISTINCT FROM p_id
       OR c.action IS DISTINCT FROM p_action OR c.tenant_id IS DISTINCT FROM orangerail.approval_tenant()
       OR (p_actor IS NOT NULL AND c.actor IS DISTINCT FROM p_actor) THEN
        RAISE EXCEPTION 'the audit record does not describe this approval change (%)', p_phase USING ERRCODE = 'ORA05';
    END IF;
    PERFORM orangerail.audit_append(p_entry);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_consume(p_id uuid)
RETURNS SETOF orangerail.approvals
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    UPDATE orangerail.approvals a SET status = 'consumed', consumed_at = now()
    WHERE a.id = p_id AND a.tenant_id = orangerail.approval_tenant() AND a.status = 'approved' AND a.expires_at > now()
    RETURNING a.*;
$fn$;
-- +goose StatementEnd

DROP FUNCTION orangerail.audit_insert(bytea, orangerail.audit_columns);
