-- The SQL verifier's column check, about half its time per record, asks
-- the entry to equal its columns as jsonb values (one comparison each)
-- instead of reading each member out, testing its type and form, and
-- comparing; and finds repeated members by a count of colons where the
-- entry holds no escape, counting members only where it does. What it
-- accepts and refuses is unchanged (the tamper catalogue holds both
-- verifiers to the same findings). Measured on a 200,000-record chain,
-- the two alternating on one loaded 2-core machine: 6.5-8.5 s before,
-- 4.2-5.8 s after (1.4-1.55 times as fast).

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
    -- audit_entry_columns', asked of the columns the entry must equal.
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
                           WHEN jsonb_typeof(p.j) IS DISTINCT FROM 'object' THEN false
                           -- The columns as the entry must spell them: a
                           -- typed jsonb value each, compared in one
                           -- operation, not read out and tested member by
                           -- member. Absent, null or another type is
                           -- not true.
                           WHEN (p.j->'tenant' = to_jsonb(c.tenant_id)
                             AND p.j->'at' = to_jsonb(to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
                             AND p.j->'correlation_id' = to_jsonb(c.correlation_id)
                             AND p.j->'phase' = to_jsonb(c.phase)
                             AND p.j->'dev_mode' = to_jsonb(c.dev_mode)
                             AND p.j->'v' = '1'::jsonb
                             AND p.j->'actor'->'subject' = to_jsonb(c.actor)
                             AND p.j->'actor'->'kind' = to_jsonb(c.actor_kind)
                             AND (p.j->'action' = to_jsonb(c.action) OR (c.action IS NULL AND NOT p.j ? 'action'))
                             AND (p.j->'approval_id' = to_jsonb(c.approval_id) OR (c.approval_id IS NULL AND NOT p.j ? 'approval_id'))) IS NOT TRUE THEN false
                           -- What the entry's rules ask of a value, asked of
                           -- the column it equals: the time's span (to_char
                           -- writes no era and a fifth digit past 9999),
                           -- the id's length, the phase's form, a subject,
                           -- an actor kind.
                           WHEN (c.at >= '0001-01-01 00:00:00+00' AND c.at < '10000-01-01 00:00:00+00'
                             AND length(c.correlation_id) BETWEEN 1 AND 128 AND c.phase ~ '^[a-z][a-z_]{0,63}$'
                             AND c.actor <> '' AND c.actor_kind IN ('agent', 'human', 'operator', 'system')) IS NOT TRUE THEN false
                           -- json keeps repeated members, jsonb keeps the
                           -- last. With no backslash in the entry (no
                           -- escape can spell a name twice) and as many
                           -- colons in it as in its jsonb's text, no
                           -- member was dropped at any depth: a dropped one
                           -- takes its name's colon with it, and a string's
                           -- colons are the same in both. Else the members
                           -- of the two objects that matter are counted.
                           WHEN strpos(p.doc, '\') = 0
                             AND length(p.doc) - length(replace(p.doc, ':', '')) = length(p.j::text) - length(replace(p.j::text, ':', '')) THEN true
                           ELSE (SELECT count(*) FROM json_object_keys(p.doc::json)) = (SELECT count(*) FROM jsonb_object_keys(p.j))
                             AND (SELECT count(*) FROM json_object_keys(p.doc::json->'actor')) = (SELECT count(*) FROM jsonb_object_keys(p.j->'actor'))
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
