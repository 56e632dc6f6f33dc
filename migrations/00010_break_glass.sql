-- Break glass: a decision made around the API, by the database's owner.
--
-- When the desk and its API are down, an operator logged in as the owner of
-- the orangerail schema (or a superuser) may still decide an approval
-- (`orangerail approvals approve --break-glass --reason TEXT`). The record
-- names the actor {"kind": "operator", "subject": session_user} and carries
-- the reason; it is appended through approval_decide like any decision, so
-- it is chained, and both verifiers list every one.
--
--   audit_entry_columns  accepts the actor kind "operator"
--   audit_operator_guard refuses (ORA06) an operator record appended by a
--                        login that is neither the schema's owner nor a
--                        superuser: a runtime login, which may call
--                        audit_append and approval_decide, cannot pass
--                        itself off as an operator around the engine
--   audit_break_glass    lists a tenant's operator records and their reasons
--
-- Custom SQLSTATE raised here (classified in Go by code, never by text):
--   ORA06  an operator record appended by a login that is not the owner

-- +goose Up

-- audit_entry_columns as migrations/00001 made it, with the kind "operator".
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

-- audit_operator_guard runs inside audit_append, whose SECURITY DEFINER
-- changes current_user but never session_user: session_user is the login
-- that connected, which SQL it runs cannot change.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_operator_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_roles r, pg_namespace n
        WHERE r.rolname = session_user AND n.nspname = 'orangerail'
          AND (r.rolsuper OR r.oid = n.nspowner)) THEN
        RAISE EXCEPTION 'only the owner of the orangerail schema records an operator''s decision'
            USING ERRCODE = 'ORA06';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- The WHEN clause keeps every other append free of the trigger's call.
CREATE TRIGGER audit_operator_guard BEFORE INSERT ON orangerail.audit
    FOR EACH ROW WHEN (NEW.actor_kind = 'operator') EXECUTE FUNCTION orangerail.audit_operator_guard();
ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_operator_guard;

-- audit_break_glass lists a tenant's records made by an operator (every
-- break-glass decision), with the reason each gives. They are reported,
-- not failures: a break-glass decision is legitimate and must stay
-- visible. The Go verifier reports the same rows (engine.Report.BreakGlass);
-- a test holds them equal.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(convert_from(a.entry, 'UTF8')::jsonb->'result'->>'break_glass_reason', '')
    FROM orangerail.audit a
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.audit_operator_guard(), orangerail.audit_break_glass(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_break_glass(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- +goose Down
DROP FUNCTION orangerail.audit_break_glass(text);
DROP TRIGGER audit_operator_guard ON orangerail.audit;
DROP FUNCTION orangerail.audit_operator_guard();

-- audit_entry_columns as migrations/00001 made it. Operator records written
-- meanwhile no longer parse: the verifiers report them as column_mismatch.
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
          OR j->'actor'->>'kind' NOT IN ('agent', 'human', 'system')
            THEN 'field "actor" must be {"kind": agent|human|system, "subject": non-empty string}'
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
