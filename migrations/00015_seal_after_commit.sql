-- Seal after commit: a record is written with the change it records and
-- linked into its tenant's chain by a sealer, in batches, after commit.
--
-- Until now audit_append locked the tenant's head, computed the record's
-- link and advanced the head, so every transaction that appended held its
-- tenant's head lock across its commit (an fsync): one tenant took about
-- one append per commit latency, however many agents it ran.
--
-- Now:
--   * audit_append inserts the record, its columns parsed from its bytes as
--     before, with seq, prev_hash and hash NULL (unsealed), in the caller's
--     transaction: the record still commits or rolls back with the effect
--     it records, and a refused record still refuses the effect. It takes
--     no lock another tenant's or the same tenant's writer waits on.
--   * audit_seal, run by the sealer of any replica in a short transaction
--     of its own, locks the tenant's head (one sealer per tenant at a time;
--     another passes over a locked head), gives the committed unsealed
--     records, oldest first (by id, the order they were inserted in), the
--     next seqs and their links by the unchanged formula
--
--       hash = sha256(prev_hash || int8send(seq) || sha256(entry))
--
--     and advances the head, all in that transaction: a sealer that dies
--     mid-batch rolls back whole, so no seq is lost or given twice, and a
--     record of a transaction that rolled back was never visible to seal.
--   * A record is sealed once: the only UPDATE the table accepts gives an
--     unsealed record its seq, prev_hash, hash and sealed_at, and nothing
--     else.
--   * The verifiers check the sealed chain; a record still unsealed longer
--     than a bound is a finding of its own (audit_unsealed). The relations
--     between records (an execution's finish after its start, an approval's
--     records before what ran) hold over every committed record, sealed or
--     not, in the order they were written (id).
--
-- Chains are migrated in place: every existing record is already sealed,
-- and keeps its seq, links and bytes; it gets an id and no sealed_at
-- (sealed when it was appended, before this migration).

-- +goose Up
ALTER TABLE orangerail.audit DROP CONSTRAINT audit_pkey;
ALTER TABLE orangerail.audit
    -- The order records were written in; sealing follows it. Unique by its
    -- identity: no index holds it but the unsealed records', since every
    -- index on this table is written twice for each record.
    ADD COLUMN id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    -- When the record was sealed (the sealer's clock); NULL while unsealed,
    -- and for records sealed as they were appended, before seal-after-commit.
    ADD COLUMN sealed_at timestamptz,
    ALTER COLUMN seq DROP NOT NULL,
    ALTER COLUMN prev_hash DROP NOT NULL,
    ALTER COLUMN hash DROP NOT NULL,
    ADD CONSTRAINT audit_link_whole CHECK ((seq IS NULL) = (prev_hash IS NULL) AND (seq IS NULL) = (hash IS NULL)),
    -- A sealed record's place; NULLs (unsealed records) are distinct.
    ADD CONSTRAINT audit_tenant_seq_key UNIQUE (tenant_id, seq);
CREATE INDEX audit_unsealed_idx ON orangerail.audit (tenant_id, id) WHERE seq IS NULL;

-- The owner reads every tenant's unsealed records, for
-- audit_unsealed_tenants alone, which returns tenant ids, never a row (as
-- webhook_outbox_owner_read does for the outbox).
CREATE POLICY audit_owner_unsealed ON orangerail.audit FOR SELECT TO CURRENT_USER
    USING (seq IS NULL);

-- audit_append is still the only way a row enters orangerail.audit. It
-- inserts one entry, unsealed, into the chain of the transaction's tenant.
DROP FUNCTION orangerail.audit_append(bytea);
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_append(p_entry bytea) RETURNS void
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

-- audit_seal seals up to p_limit of the transaction's tenant's committed
-- unsealed records, oldest first, and returns how many it sealed. With
-- p_wait false it returns 0 at once when another sealer holds the tenant's
-- head; with p_wait true it waits for that sealer to finish. It must run in
-- a transaction of its own (READ COMMITTED, which it checks): each
-- statement below sees what committed before it, and the batch is one
-- UPDATE that either seals every record it chose or, if one was sealed
-- meanwhile by a writer around this function, none.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_seal(p_limit integer, p_wait boolean) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
    v_seq    bigint;
    v_hash   bytea;
    v_ids    bigint[] := '{}';
    v_seqs   bigint[] := '{}';
    v_prevs  bytea[]  := '{}';
    v_hashes bytea[]  := '{}';
    v_now    timestamptz := clock_timestamp();
    v_sealed integer;
    r        record;
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'audit_seal runs in a READ COMMITTED transaction' USING ERRCODE = '25000';
    END IF;
    IF p_limit < 1 THEN
        RETURN 0;
    END IF;
    IF p_wait THEN
        SELECT h.seq, h.hash INTO v_seq, v_hash FROM orangerail.audit_heads h
        WHERE h.tenant_id = v_tenant FOR NO KEY UPDATE;
    ELSE
        SELECT h.seq, h.hash INTO v_seq, v_hash FROM orangerail.audit_heads h
        WHERE h.tenant_id = v_tenant FOR NO KEY UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
        RETURN 0; -- another sealer holds the head, or the tenant has no record
    END IF;

    -- The head was read after its lock was granted, so it is the last
    -- sealer's; this statement's snapshot is newer still and sees every
    -- record that sealer sealed.
    FOR r IN
        SELECT a.id, sha256(a.entry) AS entry_hash FROM orangerail.audit a
        WHERE a.tenant_id = v_tenant AND a.seq IS NULL
        ORDER BY a.id
        LIMIT p_limit
    LOOP
        v_ids := v_ids || r.id;
        v_prevs := v_prevs || v_hash;
        v_seq := v_seq + 1;
        v_hash := sha256(v_hash || int8send(v_seq) || r.entry_hash);
        v_seqs := v_seqs || v_seq;
        v_hashes := v_hashes || v_hash;
    END LOOP;
    IF cardinality(v_ids) = 0 THEN
        RETURN 0;
    END IF;

    UPDATE orangerail.audit a
    SET seq = u.seq, prev_hash = u.prev_hash, hash = u.hash, sealed_at = v_now
    FROM unnest(v_ids, v_seqs, v_prevs, v_hashes) AS u(id, seq, prev_hash, hash)
    WHERE a.tenant_id = v_tenant AND a.id = u.id AND a.seq IS NULL;
    GET DIAGNOSTICS v_sealed = ROW_COUNT;
    IF v_sealed <> cardinality(v_ids) THEN
        RAISE EXCEPTION 'audit records were sealed around audit_seal' USING ERRCODE = 'ORA01';
    END IF;
    UPDATE orangerail.audit_heads h SET seq = v_seq, hash = v_hash WHERE h.tenant_id = v_tenant;
    RETURN v_sealed;
END
$fn$;
-- +goose StatementEnd

-- audit_unsealed_tenants names up to p_limit tenants with an unsealed
-- record, each with its oldest unsealed record's time, oldest first, for
-- the sealers. Tenant ids only, which the runtime may read anyway.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_unsealed_tenants(p_limit integer)
RETURNS TABLE (tenant_id text, oldest timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.tenant_id, min(a.at) FROM orangerail.audit a
    WHERE a.seq IS NULL
    GROUP BY a.tenant_id
    ORDER BY 2
    LIMIT p_limit
$fn$;
-- +goose StatementEnd

-- audit_unsealed lists a tenant's records still unsealed more than p_bound
-- after their time: a finding, since the sealers keep every record sealed
-- within the bound while any replica runs. It runs with the caller's
-- rights, under Row Level Security.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_unsealed(p_tenant text, p_bound interval)
RETURNS TABLE (correlation_id text, phase text, action text, at timestamptz, unsealed_for interval)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.correlation_id, a.phase, a.action, a.at, now() - a.at
    FROM orangerail.audit a
    WHERE a.tenant_id = p_tenant AND a.seq IS NULL AND a.at < now() - p_bound
    ORDER BY a.id
$fn$;
-- +goose StatementEnd

-- The one UPDATE of a record the table accepts: its seal. DELETE stays
-- refused.
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_seal_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.seq IS NULL AND NEW.seq IS NOT NULL AND NEW.sealed_at IS NOT NULL
       AND ROW(NEW.id, NEW.tenant_id, NEW.entry, NEW.at, NEW.correlation_id, NEW.phase, NEW.action, NEW.actor,
               NEW.actor_kind, NEW.dev_mode, NEW.approval_id)
           IS NOT DISTINCT FROM
           ROW(OLD.id, OLD.tenant_id, OLD.entry, OLD.at, OLD.correlation_id, OLD.phase, OLD.action, OLD.actor,
               OLD.actor_kind, OLD.dev_mode, OLD.approval_id) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'ORA01';
END
$fn$;
-- +goose StatementEnd
DROP TRIGGER audit_refuse_update_delete ON orangerail.audit;
CREATE TRIGGER audit_refuse_update_delete BEFORE UPDATE OR DELETE ON orangerail.audit
    FOR EACH ROW EXECUTE FUNCTION orangerail.audit_seal_only();
ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;

-- A head only ever advances: by the batch a sealer sealed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_heads_advance_only() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.seq <= OLD.seq THEN
        RAISE EXCEPTION 'orangerail.audit_heads only advances' USING ERRCODE = 'ORA01';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- The relations between records hold over every committed record, in the
-- order they were written; their seq is NULL while unsealed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
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
            AND f.id > s.id AND f.phase IN ('execution_succeeded', 'execution_failed'))
    ORDER BY s.seq NULLS LAST, s.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unexplained_executions(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, action text, missing text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.seq, e.approval_id, e.phase, e.action, m.missing
    FROM orangerail.audit e
    CROSS JOIN LATERAL (
        SELECT array_agg(r.phase ORDER BY r.ord) AS missing
        FROM unnest(ARRAY['staged', 'approved']) WITH ORDINALITY AS r(phase, ord)
        WHERE NOT EXISTS (
            SELECT FROM orangerail.audit b
            WHERE b.tenant_id = e.tenant_id AND b.approval_id = e.approval_id AND b.phase = r.phase AND b.id < e.id)
    ) m
    WHERE e.tenant_id = p_tenant AND e.approval_id IS NOT NULL AND m.missing IS NOT NULL
      AND e.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                      'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error')
    ORDER BY e.seq NULLS LAST, e.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_break_glass(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, operator text, at timestamptz, reason text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.seq, a.approval_id, a.phase, a.actor, a.at,
           coalesce(convert_from(a.entry, 'UTF8')::jsonb->'result'->>'break_glass_reason', '')
    FROM orangerail.audit a
    WHERE a.tenant_id = p_tenant AND a.actor_kind = 'operator'
    ORDER BY a.seq NULLS LAST, a.id
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.audit_append(bytea), orangerail.audit_seal(integer, boolean),
    orangerail.audit_unsealed_tenants(integer), orangerail.audit_unsealed(text, interval),
    orangerail.audit_seal_only() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_append(bytea), orangerail.audit_seal(integer, boolean),
    orangerail.audit_unsealed_tenants(integer)
    TO orangerail_runtime;
GRANT EXECUTE ON FUNCTION orangerail.audit_unsealed(text, interval)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

-- The SQL verifier checks the sealed chain: audit_verify as migrations/00014
-- made it, over the records that have a seq. An unsealed record is not yet
-- a link; audit_unsealed reports one left unsealed too long.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_verify(p_tenant text)
RETURNS TABLE (seq bigint, problem text, expected_hash bytea, found_hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    genesis constant bytea := decode(repeat('00', 32), 'hex');
    b_seq      bigint;
    b_problem  text;
    b_expected bytea;
    b_found    bytea;
BEGIN
    -- One pass over the chain in seq order: each row's link to the row
    -- before it (a window, so no row waits on another) and its columns
    -- against its entry, parsed once. The column rules are
    -- audit_entry_columns', each WHEN a refusal there, in its order.
    BEGIN
        SELECT k.seq, k.problem, k.expected, k.hash
        INTO b_seq, b_problem, b_expected, b_found
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash <> c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash <> l.expected THEN 'hash_mismatch'
                       WHEN NOT CASE
                           WHEN jsonb_typeof(p.j) <> 'object' OR jsonb_typeof(p.j->'actor') IS DISTINCT FROM 'object' THEN false
                           WHEN p.j->'v' IS DISTINCT FROM '1'::jsonb THEN false
                           WHEN jsonb_typeof(p.j->'tenant') IS DISTINCT FROM 'string' THEN false
                           WHEN jsonb_typeof(p.j->'at') IS DISTINCT FROM 'string'
                             OR p.j->>'at' !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN false
                           WHEN to_char((p.j->>'at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> p.j->>'at' THEN false
                           WHEN jsonb_typeof(p.j->'correlation_id') IS DISTINCT FROM 'string'
                             OR length(p.j->>'correlation_id') NOT BETWEEN 1 AND 128 THEN false
                           WHEN jsonb_typeof(p.j->'phase') IS DISTINCT FROM 'string' OR p.j->>'phase' !~ '^[a-z][a-z_]{0,63}$' THEN false
                           WHEN p.j ? 'action' AND jsonb_typeof(p.j->'action') IS DISTINCT FROM 'string' THEN false
                           WHEN jsonb_typeof(p.j->'actor'->'subject') IS DISTINCT FROM 'string' OR p.j->'actor'->>'subject' = ''
                             OR jsonb_typeof(p.j->'actor'->'kind') IS DISTINCT FROM 'string'
                             OR p.j->'actor'->>'kind' NOT IN ('agent', 'human', 'operator', 'system') THEN false
                           WHEN jsonb_typeof(p.j->'dev_mode') IS DISTINCT FROM 'boolean' THEN false
                           WHEN p.j ? 'approval_id' AND (jsonb_typeof(p.j->'approval_id') IS DISTINCT FROM 'string'
                             OR p.j->>'approval_id' !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN false
                           -- json keeps repeated members, jsonb keeps the last.
                           WHEN (SELECT count(*) FROM json_object_keys(p.doc::json)) <> (SELECT count(*) FROM jsonb_object_keys(p.j))
                             OR (SELECT count(*) FROM json_object_keys(p.doc::json->'actor')) <> (SELECT count(*) FROM jsonb_object_keys(p.j->'actor')) THEN false
                           ELSE ROW(p.j->>'tenant', (p.j->>'at')::timestamptz, p.j->>'correlation_id', p.j->>'phase', p.j->>'action',
                                    p.j->'actor'->>'subject', p.j->'actor'->>'kind', (p.j->'dev_mode')::boolean, (p.j->>'approval_id')::uuid)
                                IS NOT DISTINCT FROM
                                ROW(c.tenant_id, c.at, c.correlation_id, c.phase, c.action, c.actor, c.actor_kind, c.dev_mode, c.approval_id)
                       END THEN 'column_mismatch'
                   END AS problem
            -- Each row's entry is parsed once, in the window's own
            -- projection: a subquery with a window is never flattened into
            -- the query above, so the many uses of j read one value
            -- instead of each parsing the entry again.
            FROM (
                SELECT a.seq, a.prev_hash, a.hash, a.tenant_id, a.at, a.correlation_id, a.phase, a.action, a.actor,
                       a.actor_kind, a.dev_mode, a.approval_id,
                       lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
                       lag(a.hash, 1, genesis) OVER w AS before_hash,
                       sha256(a.entry) AS entry_hash,
                       convert_from(a.entry, 'UTF8') AS doc,
                       convert_from(a.entry, 'UTF8')::jsonb AS j
                FROM orangerail.audit a
                WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL
                WINDOW w AS (ORDER BY a.seq)
            ) c
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || c.entry_hash) AS expected) l
            CROSS JOIN LATERAL (SELECT c.doc, c.j) p
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
    EXCEPTION WHEN OTHERS THEN
        -- Some entry is not even UTF-8 JSON, or names a time or id that
        -- does not exist: Postgres cannot read it without raising. Only a
        -- tamperer writes one, so only then does the walk go row by row,
        -- each row's columns checked under a guard of their own.
        SELECT k.seq, k.problem, k.expected, k.hash
        INTO b_seq, b_problem, b_expected, b_found
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash <> c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash <> l.expected THEN 'hash_mismatch'
                       WHEN NOT orangerail.audit_columns_match(c.row) THEN 'column_mismatch'
                   END AS problem
            FROM (
                SELECT a.seq, a.prev_hash, a.hash, a.entry, a AS row,
                       lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
                       lag(a.hash, 1, genesis) OVER w AS before_hash
                FROM orangerail.audit a
                WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL
                WINDOW w AS (ORDER BY a.seq)
            ) c
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || sha256(c.entry)) AS expected) l
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
    END;
    IF b_problem IS NOT NULL THEN
        RETURN QUERY SELECT b_seq, b_problem, b_expected, b_found;
        RETURN;
    END IF;

    -- The head must name the last row.
    RETURN QUERY
    WITH last_link AS (
        SELECT coalesce((SELECT b.seq FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), 0) AS seq,
               coalesce((SELECT b.hash FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), genesis) AS hash
    ), head AS (
        SELECT coalesce((SELECT h.seq FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant), 0) AS seq,
               coalesce((SELECT h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant), genesis) AS hash
    )
    SELECT head.seq, 'head_mismatch'::text, last_link.hash, head.hash
    FROM head, last_link
    WHERE (head.seq, head.hash) IS DISTINCT FROM (last_link.seq, last_link.hash);
END
$fn$;
-- +goose StatementEnd


-- +goose Down
-- Seal every record first: the chain before this migration has no
-- unsealed record.
-- +goose StatementBegin
DO $seal$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT u.tenant_id FROM orangerail.audit_unsealed_tenants(2147483647) u LOOP
        PERFORM set_config('orangerail.tenant_id', t, true);
        WHILE orangerail.audit_seal(100000, true) > 0 LOOP
            NULL;
        END LOOP;
    END LOOP;
    PERFORM set_config('orangerail.tenant_id', '', true);
END
$seal$;
-- +goose StatementEnd

DROP FUNCTION orangerail.audit_unsealed(text, interval);
DROP FUNCTION orangerail.audit_unsealed_tenants(integer);
DROP FUNCTION orangerail.audit_seal(integer, boolean);
DROP POLICY audit_owner_unsealed ON orangerail.audit;
DROP TRIGGER audit_refuse_update_delete ON orangerail.audit;
DROP FUNCTION orangerail.audit_seal_only();
CREATE TRIGGER audit_refuse_update_delete BEFORE UPDATE OR DELETE ON orangerail.audit
    FOR EACH ROW EXECUTE FUNCTION orangerail.refuse_change();
ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
DROP INDEX orangerail.audit_unsealed_idx;
ALTER TABLE orangerail.audit
    DROP CONSTRAINT audit_tenant_seq_key,
    DROP CONSTRAINT audit_link_whole,
    DROP COLUMN sealed_at,
    DROP COLUMN id,
    ALTER COLUMN seq SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL,
    ALTER COLUMN hash SET NOT NULL,
    ADD PRIMARY KEY (tenant_id, seq);

-- The functions as migrations/00001, 00006, 00010 and 00014 made them.
DROP FUNCTION orangerail.audit_append(bytea);
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_heads_advance_only() RETURNS trigger
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
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
CREATE OR REPLACE FUNCTION orangerail.audit_unexplained_executions(p_tenant text)
RETURNS TABLE (seq bigint, approval_id uuid, phase text, action text, missing text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.seq, e.approval_id, e.phase, e.action, m.missing
    FROM orangerail.audit e
    CROSS JOIN LATERAL (
        SELECT array_agg(r.phase ORDER BY r.ord) AS missing
        FROM unnest(ARRAY['staged', 'approved']) WITH ORDINALITY AS r(phase, ord)
        WHERE NOT EXISTS (
            SELECT FROM orangerail.audit b
            WHERE b.tenant_id = e.tenant_id AND b.approval_id = e.approval_id AND b.phase = r.phase AND b.seq < e.seq)
    ) m
    WHERE e.tenant_id = p_tenant AND e.approval_id IS NOT NULL AND m.missing IS NOT NULL
      AND e.phase IN ('execution_started', 'execution_succeeded', 'execution_failed',
                      'precondition_failed', 'signature_mismatch', 'invalid_input', 'resolve_error')
    ORDER BY e.seq
$fn$;
-- +goose StatementEnd


-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_break_glass(p_tenant text)
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_verify(p_tenant text)
RETURNS TABLE (seq bigint, problem text, expected_hash bytea, found_hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    genesis constant bytea := decode(repeat('00', 32), 'hex');
    b_seq      bigint;
    b_problem  text;
    b_expected bytea;
    b_found    bytea;
BEGIN
    -- One pass over the chain in seq order: each row's link to the row
    -- before it (a window, so no row waits on another) and its columns
    -- against its entry, parsed once. The column rules are
    -- audit_entry_columns', each WHEN a refusal there, in its order.
    BEGIN
        SELECT k.seq, k.problem, k.expected, k.hash
        INTO b_seq, b_problem, b_expected, b_found
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash <> c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash <> l.expected THEN 'hash_mismatch'
                       WHEN NOT CASE
                           WHEN jsonb_typeof(p.j) <> 'object' OR jsonb_typeof(p.j->'actor') IS DISTINCT FROM 'object' THEN false
                           WHEN p.j->'v' IS DISTINCT FROM '1'::jsonb THEN false
                           WHEN jsonb_typeof(p.j->'tenant') IS DISTINCT FROM 'string' THEN false
                           WHEN jsonb_typeof(p.j->'at') IS DISTINCT FROM 'string'
                             OR p.j->>'at' !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN false
                           WHEN to_char((p.j->>'at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> p.j->>'at' THEN false
                           WHEN jsonb_typeof(p.j->'correlation_id') IS DISTINCT FROM 'string'
                             OR length(p.j->>'correlation_id') NOT BETWEEN 1 AND 128 THEN false
                           WHEN jsonb_typeof(p.j->'phase') IS DISTINCT FROM 'string' OR p.j->>'phase' !~ '^[a-z][a-z_]{0,63}$' THEN false
                           WHEN p.j ? 'action' AND jsonb_typeof(p.j->'action') IS DISTINCT FROM 'string' THEN false
                           WHEN jsonb_typeof(p.j->'actor'->'subject') IS DISTINCT FROM 'string' OR p.j->'actor'->>'subject' = ''
                             OR jsonb_typeof(p.j->'actor'->'kind') IS DISTINCT FROM 'string'
                             OR p.j->'actor'->>'kind' NOT IN ('agent', 'human', 'operator', 'system') THEN false
                           WHEN jsonb_typeof(p.j->'dev_mode') IS DISTINCT FROM 'boolean' THEN false
                           WHEN p.j ? 'approval_id' AND (jsonb_typeof(p.j->'approval_id') IS DISTINCT FROM 'string'
                             OR p.j->>'approval_id' !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN false
                           -- json keeps repeated members, jsonb keeps the last.
                           WHEN (SELECT count(*) FROM json_object_keys(p.doc::json)) <> (SELECT count(*) FROM jsonb_object_keys(p.j))
                             OR (SELECT count(*) FROM json_object_keys(p.doc::json->'actor')) <> (SELECT count(*) FROM jsonb_object_keys(p.j->'actor')) THEN false
                           ELSE ROW(p.j->>'tenant', (p.j->>'at')::timestamptz, p.j->>'correlation_id', p.j->>'phase', p.j->>'action',
                                    p.j->'actor'->>'subject', p.j->'actor'->>'kind', (p.j->'dev_mode')::boolean, (p.j->>'approval_id')::uuid)
                                IS NOT DISTINCT FROM
                                ROW(c.tenant_id, c.at, c.correlation_id, c.phase, c.action, c.actor, c.actor_kind, c.dev_mode, c.approval_id)
                       END THEN 'column_mismatch'
                   END AS problem
            -- Each row's entry is parsed once, in the window's own
            -- projection: a subquery with a window is never flattened into
            -- the query above, so the many uses of j read one value
            -- instead of each parsing the entry again.
            FROM (
                SELECT a.seq, a.prev_hash, a.hash, a.tenant_id, a.at, a.correlation_id, a.phase, a.action, a.actor,
                       a.actor_kind, a.dev_mode, a.approval_id,
                       lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
                       lag(a.hash, 1, genesis) OVER w AS before_hash,
                       sha256(a.entry) AS entry_hash,
                       convert_from(a.entry, 'UTF8') AS doc,
                       convert_from(a.entry, 'UTF8')::jsonb AS j
                FROM orangerail.audit a
                WHERE a.tenant_id = p_tenant
                WINDOW w AS (ORDER BY a.seq)
            ) c
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || c.entry_hash) AS expected) l
            CROSS JOIN LATERAL (SELECT c.doc, c.j) p
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
    EXCEPTION WHEN OTHERS THEN
        -- Some entry is not even UTF-8 JSON, or names a time or id that
        -- does not exist: Postgres cannot read it without raising. Only a
        -- tamperer writes one, so only then does the walk go row by row,
        -- each row's columns checked under a guard of their own.
        SELECT k.seq, k.problem, k.expected, k.hash
        INTO b_seq, b_problem, b_expected, b_found
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash <> c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash <> l.expected THEN 'hash_mismatch'
                       WHEN NOT orangerail.audit_columns_match(c.row) THEN 'column_mismatch'
                   END AS problem
            FROM (
                SELECT a.seq, a.prev_hash, a.hash, a.entry, a AS row,
                       lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
                       lag(a.hash, 1, genesis) OVER w AS before_hash
                FROM orangerail.audit a
                WHERE a.tenant_id = p_tenant
                WINDOW w AS (ORDER BY a.seq)
            ) c
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || sha256(c.entry)) AS expected) l
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
    END;
    IF b_problem IS NOT NULL THEN
        RETURN QUERY SELECT b_seq, b_problem, b_expected, b_found;
        RETURN;
    END IF;

    -- The head must name the last row.
    RETURN QUERY
    WITH last_link AS (
        SELECT coalesce((SELECT b.seq FROM orangerail.audit b WHERE b.tenant_id = p_tenant ORDER BY b.seq DESC LIMIT 1), 0) AS seq,
               coalesce((SELECT b.hash FROM orangerail.audit b WHERE b.tenant_id = p_tenant ORDER BY b.seq DESC LIMIT 1), genesis) AS hash
    ), head AS (
        SELECT coalesce((SELECT h.seq FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant), 0) AS seq,
               coalesce((SELECT h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant), genesis) AS hash
    )
    SELECT head.seq, 'head_mismatch'::text, last_link.hash, head.hash
    FROM head, last_link
    WHERE (head.seq, head.hash) IS DISTINCT FROM (last_link.seq, last_link.hash);
END
$fn$;
-- +goose StatementEnd


REVOKE ALL ON FUNCTION orangerail.audit_append(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.audit_append(bytea) TO orangerail_runtime;
