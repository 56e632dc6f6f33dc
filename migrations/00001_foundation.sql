-- The foundation: tenants, approvals, and the per-tenant hash-chained audit
-- log, with the roles that may touch them.
--
-- Rules this migration makes true, each enforced by Postgres itself:
--   * The runtime role never owns a table and has no BYPASSRLS.
--   * The audit table only grows, and only through orangerail.audit_append,
--     which hashes the exact bytes it stores.
--   * UPDATE, DELETE and TRUNCATE of audit rows are refused by privileges and
--     by ENABLE ALWAYS triggers (session_replication_role = replica does not
--     skip them).
--   * Row Level Security (FORCE) scopes the runtime to the tenant its
--     transaction names, and auditors to the tenants granted to their login.
--
-- Custom SQLSTATEs raised here (classified in Go by code, never by text):
--   ORA01  the audit log or its head is append-only
--   ORA02  an audit entry is not a valid orangerail audit record
--   ORA03  the transaction names no tenant, or a different tenant
--   ORA04  an approval change breaks the approval lifecycle

-- +goose Up

-- Roles are cluster-wide: several orangerail databases in one cluster share
-- them, and two may be migrated at once, so creation tolerates a twin.
-- +goose StatementBegin
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['orangerail_runtime', 'orangerail_auditor', 'orangerail_readonly'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN NOBYPASSRLS', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created meanwhile by a migration of another database
            END;
        END IF;
    END LOOP;
END
$roles$;
-- +goose StatementEnd

CREATE SCHEMA orangerail;
REVOKE ALL ON SCHEMA orangerail FROM PUBLIC;
GRANT USAGE ON SCHEMA orangerail TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

CREATE TABLE orangerail.tenants (
    id         text        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT tenants_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$')
);

-- Which tenants each auditor login may read. Matched on session_user, which
-- SQL run by that login cannot change (SET ROLE changes current_user only),
-- so auditor isolation does not rest on a setting the auditor controls.
CREATE TABLE orangerail.auditor_grants (
    role_name name NOT NULL,
    tenant_id text NOT NULL REFERENCES orangerail.tenants (id),
    PRIMARY KEY (role_name, tenant_id)
);

CREATE TABLE orangerail.approvals (
    id              uuid        PRIMARY KEY,
    tenant_id       text        NOT NULL REFERENCES orangerail.tenants (id),
    action          text        NOT NULL,
    requested_by    text        NOT NULL,
    -- json, not jsonb: the verbatim text the approver reviews is the text
    -- that executes.
    input           json        NOT NULL,
    input_digest    bytea       NOT NULL CHECK (octet_length(input_digest) = 32),
    definition_hash bytea       NOT NULL CHECK (octet_length(definition_hash) = 32),
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'rejected', 'consumed', 'expired')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    decided_by      text,
    decided_at      timestamptz,
    decision_note   text,
    consumed_at     timestamptz,
    CONSTRAINT approvals_expiry_after_creation CHECK (expires_at > created_at),
    CONSTRAINT approvals_decision_whole CHECK ((decided_by IS NULL) = (decided_at IS NULL)),
    CONSTRAINT approvals_decision_matches_status CHECK (
        CASE status
            WHEN 'pending' THEN decided_by IS NULL
            WHEN 'expired' THEN true
            ELSE decided_by IS NOT NULL
        END),
    CONSTRAINT approvals_consumed_matches_status CHECK ((status = 'consumed') = (consumed_at IS NOT NULL))
);

-- An identical open call (same tenant, requester, action and input) maps to
-- one approval.
CREATE UNIQUE INDEX approvals_open_call_idx ON orangerail.approvals (tenant_id, requested_by, action, input_digest)
    WHERE status IN ('pending', 'approved');
CREATE INDEX approvals_tenant_status_idx ON orangerail.approvals (tenant_id, status, created_at);

-- audit.tenant_id has no foreign key of its own: rows enter only through
-- audit_append, which first makes the tenant's head, and the head references
-- the tenant. Sparing the per-row check keeps appends cheap.
CREATE TABLE orangerail.audit (
    tenant_id      text        NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    -- The record's exact canonical bytes (RFC 8785 JSON). The hash covers
    -- these bytes; every column below is filled from them by audit_append.
    entry          bytea       NOT NULL,
    at             timestamptz NOT NULL,
    correlation_id text        NOT NULL,
    phase          text        NOT NULL,
    action         text,
    actor          text        NOT NULL,
    actor_kind     text        NOT NULL,
    dev_mode       boolean     NOT NULL,
    approval_id    uuid,
    prev_hash      bytea       NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash           bytea       NOT NULL CHECK (octet_length(hash) = 32),
    PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX audit_correlation_idx ON orangerail.audit (tenant_id, correlation_id);
CREATE INDEX audit_approval_idx ON orangerail.audit (tenant_id, approval_id) WHERE approval_id IS NOT NULL;

-- The last link of each tenant's chain. Locked by every append, so appends
-- to one tenant are serialized and its chain has no gaps.
-- Every append rewrites its tenant's head: a low fillfactor spreads heads
-- over pages and leaves room for HOT updates, so appends to different
-- tenants do not queue on one page.
CREATE TABLE orangerail.audit_heads (
    tenant_id text   PRIMARY KEY REFERENCES orangerail.tenants (id),
    seq       bigint NOT NULL CHECK (seq >= 0),
    hash      bytea  NOT NULL CHECK (octet_length(hash) = 32)
) WITH (fillfactor = 10);

-- The queryable columns of an audit entry, parsed from its bytes.
CREATE TYPE orangerail.audit_columns AS (
    tenant_id      text,
    at             timestamptz,
    correlation_id text,
    phase          text,
    action         text,
    actor          text,
    actor_kind     text,
    dev_mode       boolean,
    approval_id    uuid
);

-- audit_entry_columns parses an entry and refuses anything that is not a
-- well-formed orangerail audit record: bytes that are not UTF-8 (SQLSTATE
-- 22021) or not JSON (22P02), and with ORA02 a JSON value that is not an
-- object, an object with a repeated member at the top or in "actor" (whose
-- value a reader could take either way), or a missing or mistyped field.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_entry_columns(p_entry bytea)
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

-- audit_append is the only way a row enters orangerail.audit. It appends one
-- entry to the chain of the transaction's tenant and returns its link:
--
--   hash = sha256(prev_hash || int8send(seq) || sha256(entry))
--
-- where prev_hash is the previous link's hash (32 zero bytes before seq 1)
-- and int8send(seq) is seq as 8 big-endian bytes.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_append(p_entry bytea, OUT seq bigint, OUT hash bytea)
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
    c        orangerail.audit_columns;
    v_seq    bigint;
    v_hash   bytea;
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    c := orangerail.audit_entry_columns(p_entry);
    IF c.tenant_id <> v_tenant THEN
        RAISE EXCEPTION 'audit entry names another tenant than this transaction' USING ERRCODE = 'ORA03';
    END IF;

    -- Lock the head first: appends to one tenant queue here, and the next
    -- statement's snapshot, taken after the lock, sees the latest head.
    PERFORM FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
        INSERT INTO orangerail.audit_heads (tenant_id, seq, hash)
            VALUES (v_tenant, 0, decode(repeat('00', 32), 'hex'))
            ON CONFLICT DO NOTHING;
        PERFORM FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant FOR NO KEY UPDATE;
    END IF;

    -- Advance the head and insert the row it now names, in one statement.
    WITH head AS (
        SELECT h.seq, h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant
    ), moved AS (
        UPDATE orangerail.audit_heads h
        SET seq = head.seq + 1, hash = sha256(head.hash || int8send(head.seq + 1) || sha256(p_entry))
        FROM head
        WHERE h.tenant_id = v_tenant
        RETURNING h.seq, h.hash, head.hash AS prev
    )
    INSERT INTO orangerail.audit (tenant_id, seq, entry, at, correlation_id, phase, action,
                                  actor, actor_kind, dev_mode, approval_id, prev_hash, hash)
        SELECT v_tenant, m.seq, p_entry, c.at, c.correlation_id, c.phase, c.action,
               c.actor, c.actor_kind, c.dev_mode, c.approval_id, m.prev, m.hash
        FROM moved m
        RETURNING audit.seq, audit.hash INTO v_seq, v_hash;

    seq := v_seq;
    hash := v_hash;
END
$fn$;
-- +goose StatementEnd

-- audit_columns_match reports whether a row's queryable columns are exactly
-- those its entry bytes hold. It never raises: a verifier must report a
-- forged entry, not abort on it.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_columns_match(a orangerail.audit)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c orangerail.audit_columns;
BEGIN
    c := orangerail.audit_entry_columns(a.entry);
    RETURN ROW(c.tenant_id, c.at, c.correlation_id, c.phase, c.action, c.actor, c.actor_kind, c.dev_mode, c.approval_id)
        IS NOT DISTINCT FROM
        ROW(a.tenant_id, a.at, a.correlation_id, a.phase, a.action, a.actor, a.actor_kind, a.dev_mode, a.approval_id);
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END
$fn$;
-- +goose StatementEnd

-- audit_verify is the SQL-only verifier: it returns the first broken link of
-- a tenant's chain, or no row when the chain is whole. It checks, in order
-- for each row by seq: seq follows the previous seq (seq_gap); prev_hash is
-- the previous row's hash (prev_hash_mismatch); hash is the formula above
-- (hash_mismatch); the queryable columns are the entry's (column_mismatch).
-- Then the head must name the last row (head_mismatch, reported at the
-- head's seq). expected_hash is the hash the row must have given the previous
-- row's stored hash; found_hash is the hash stored. It runs with the caller's
-- rights, so Row Level Security scopes it like any query of the caller.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_verify(p_tenant text)
RETURNS TABLE (seq bigint, problem text, expected_hash bytea, found_hash bytea)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH chain AS (
        SELECT a.seq, a.prev_hash, a.hash,
               lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
               lag(a.hash, 1, decode(repeat('00', 32), 'hex')) OVER w AS before_hash,
               a.entry, a AS row
        FROM orangerail.audit a
        WHERE a.tenant_id = p_tenant
        WINDOW w AS (ORDER BY a.seq)
    ), linked AS (
        SELECT c.*, sha256(c.before_hash || int8send(c.seq) || sha256(c.entry)) AS expected
        FROM chain c
    ), first_break AS (
        SELECT l.seq,
               CASE
                   WHEN l.seq <> l.before_seq + 1 THEN 'seq_gap'
                   WHEN l.prev_hash <> l.before_hash THEN 'prev_hash_mismatch'
                   WHEN l.hash <> l.expected THEN 'hash_mismatch'
                   WHEN NOT orangerail.audit_columns_match(l.row) THEN 'column_mismatch'
               END AS problem,
               l.expected, l.hash
        FROM linked l
    ), found AS (
        SELECT * FROM first_break WHERE problem IS NOT NULL ORDER BY seq LIMIT 1
    ), last_link AS (
        SELECT coalesce(max(a.seq), 0) AS seq,
               coalesce((SELECT b.hash FROM orangerail.audit b WHERE b.tenant_id = p_tenant ORDER BY b.seq DESC LIMIT 1),
                        decode(repeat('00', 32), 'hex')) AS hash
        FROM orangerail.audit a WHERE a.tenant_id = p_tenant
    ), head AS (
        SELECT coalesce((SELECT h.seq FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant), 0) AS seq,
               coalesce((SELECT h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant),
                        decode(repeat('00', 32), 'hex')) AS hash
    )
    SELECT * FROM found
    UNION ALL
    SELECT head.seq, 'head_mismatch', last_link.hash, head.hash
    FROM head, last_link
    WHERE NOT EXISTS (SELECT FROM found)
      AND (head.seq, head.hash) IS DISTINCT FROM (last_link.seq, last_link.hash)
$fn$;
-- +goose StatementEnd

-- Phases that finish an execution, and phases that may follow a consume.
-- The Go verifier uses the same sets (internal/engine/phase.go); a test
-- holds them equal.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_unfinished(p_tenant text)
RETURNS TABLE (seq bigint, correlation_id text, action text, at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.seq, s.correlation_id, s.action, s.at
    FROM orangerail.audit s
    WHERE s.tenant_id = p_tenant AND s.phase = 'execution_started'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit f
          WHERE f.tenant_id = s.tenant_id AND f.correlation_id = s.correlation_id
            AND f.seq > s.seq AND f.phase IN ('execution_succeeded', 'execution_failed'))
    ORDER BY s.seq
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION orangerail.approvals_unaudited(p_tenant text)
RETURNS TABLE (approval_id uuid, action text, consumed_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p.id, p.action, p.consumed_at
    FROM orangerail.approvals p
    WHERE p.tenant_id = p_tenant AND p.status = 'consumed'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit a
          WHERE a.tenant_id = p.tenant_id AND a.approval_id = p.id
            AND a.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                            'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error'))
    ORDER BY p.consumed_at, p.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION orangerail.refuse_change() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'ORA01';
END
$fn$;
-- +goose StatementEnd

-- A head only ever advances by one link.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_heads_advance_only() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.seq <> OLD.seq + 1 THEN
        RAISE EXCEPTION 'orangerail.audit_heads only advances by one link' USING ERRCODE = 'ORA01';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- Approval rows keep what was staged; only status and decision move, and
-- only forward.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approvals_lifecycle() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF ROW(NEW.id, NEW.tenant_id, NEW.action, NEW.requested_by, NEW.input::text, NEW.input_digest,
           NEW.definition_hash, NEW.created_at, NEW.expires_at)
       IS DISTINCT FROM
       ROW(OLD.id, OLD.tenant_id, OLD.action, OLD.requested_by, OLD.input::text, OLD.input_digest,
           OLD.definition_hash, OLD.created_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'an approval''s staged call cannot change' USING ERRCODE = 'ORA04';
    END IF;
    IF (OLD.status, NEW.status) NOT IN (('pending', 'approved'), ('pending', 'rejected'), ('pending', 'expired'),
                                        ('approved', 'consumed'), ('approved', 'expired')) THEN
        RAISE EXCEPTION 'an approval cannot move from % to %', OLD.status, NEW.status USING ERRCODE = 'ORA04';
    END IF;
    IF OLD.status <> 'pending'
       AND ROW(NEW.decided_by, NEW.decided_at, NEW.decision_note) IS DISTINCT FROM ROW(OLD.decided_by, OLD.decided_at, OLD.decision_note) THEN
        RAISE EXCEPTION 'an approval is decided once' USING ERRCODE = 'ORA04';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

CREATE TRIGGER audit_refuse_update_delete BEFORE UPDATE OR DELETE ON orangerail.audit
    FOR EACH ROW EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER audit_refuse_truncate BEFORE TRUNCATE ON orangerail.audit
    FOR EACH STATEMENT EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER audit_heads_advance_only BEFORE UPDATE ON orangerail.audit_heads
    FOR EACH ROW EXECUTE FUNCTION orangerail.audit_heads_advance_only();
CREATE TRIGGER audit_heads_refuse_delete BEFORE DELETE ON orangerail.audit_heads
    FOR EACH ROW EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER audit_heads_refuse_truncate BEFORE TRUNCATE ON orangerail.audit_heads
    FOR EACH STATEMENT EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER approvals_lifecycle BEFORE UPDATE ON orangerail.approvals
    FOR EACH ROW EXECUTE FUNCTION orangerail.approvals_lifecycle();
CREATE TRIGGER approvals_refuse_delete BEFORE DELETE ON orangerail.approvals
    FOR EACH ROW EXECUTE FUNCTION orangerail.refuse_change();
CREATE TRIGGER approvals_refuse_truncate BEFORE TRUNCATE ON orangerail.approvals
    FOR EACH STATEMENT EXECUTE FUNCTION orangerail.refuse_change();

ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate;
ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_advance_only;
ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_delete;
ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_truncate;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_lifecycle;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_refuse_delete;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_refuse_truncate;

-- Row Level Security. The runtime (and the owner, through audit_append) sees
-- the tenant its transaction names; auditors see the tenants granted to
-- their login. No policy is TO PUBLIC: a role with no policy sees nothing.
ALTER TABLE orangerail.approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.approvals FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.audit FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.audit_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.audit_heads FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.auditor_grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.auditor_grants FORCE ROW LEVEL SECURITY;

CREATE POLICY approvals_tenant ON orangerail.approvals TO orangerail_runtime, CURRENT_USER
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY audit_tenant ON orangerail.audit TO orangerail_runtime, CURRENT_USER
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY audit_heads_tenant ON orangerail.audit_heads TO orangerail_runtime, CURRENT_USER
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));

CREATE POLICY approvals_auditor ON orangerail.approvals FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_auditor ON orangerail.audit FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY audit_heads_auditor ON orangerail.audit_heads FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (tenant_id IN (SELECT g.tenant_id FROM orangerail.auditor_grants g WHERE g.role_name = session_user));
CREATE POLICY auditor_grants_self ON orangerail.auditor_grants FOR SELECT TO orangerail_auditor, orangerail_readonly
    USING (role_name = session_user);
CREATE POLICY auditor_grants_owner ON orangerail.auditor_grants TO CURRENT_USER
    USING (true) WITH CHECK (true);

-- Privileges: nothing by default, then exactly what each role needs.
REVOKE ALL ON ALL TABLES IN SCHEMA orangerail FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA orangerail FROM PUBLIC;

GRANT SELECT, INSERT ON orangerail.tenants TO orangerail_runtime;
GRANT SELECT, INSERT, UPDATE ON orangerail.approvals TO orangerail_runtime;
GRANT SELECT ON orangerail.audit, orangerail.audit_heads TO orangerail_runtime;
GRANT EXECUTE ON FUNCTION orangerail.audit_append(bytea) TO orangerail_runtime;

GRANT SELECT ON orangerail.audit, orangerail.audit_heads, orangerail.approvals, orangerail.auditor_grants
    TO orangerail_auditor, orangerail_readonly;

GRANT EXECUTE ON FUNCTION
    orangerail.audit_entry_columns(bytea),
    orangerail.audit_columns_match(orangerail.audit),
    orangerail.audit_verify(text),
    orangerail.audit_unfinished(text),
    orangerail.approvals_unaudited(text)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- +goose Down
DROP SCHEMA orangerail CASCADE;

-- Roles are shared by the cluster's databases: one that another database
-- still uses, or that cannot be dropped this instant (a database being
-- created or dropped meanwhile), stays.
-- +goose StatementBegin
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['orangerail_runtime', 'orangerail_auditor', 'orangerail_readonly'] LOOP
        BEGIN
            EXECUTE format('DROP ROLE IF EXISTS %I', r);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
END
$roles$;
-- +goose StatementEnd
