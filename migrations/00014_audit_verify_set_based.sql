-- The SQL verifier without a guard per row.
--
-- orangerail.audit_verify (migrations/00001) checked each row's columns
-- against its entry through audit_columns_match, whose exception guard
-- costs a subtransaction per row: about 27,000 rows a second. It is now one
-- pass over the chain in seq order that parses each entry once and checks
-- its columns under audit_entry_columns' rules written out inline, beside
-- the links recomputed with the same formula; the per-row guard runs only
-- when some entry cannot be read at all (not UTF-8, not JSON, a date that
-- does not exist), which only a tamperer writes. Same output, same
-- problems in the same order, same rights (the caller's, under Row Level
-- Security).
--
-- The rules must stay those of audit_entry_columns (migrations/00010 made
-- them last); TestSQLVerifierMatchesEntryColumns holds them equal.

-- +goose Up
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

-- +goose Down
-- audit_verify as migrations/00001 made it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_verify(p_tenant text)
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
