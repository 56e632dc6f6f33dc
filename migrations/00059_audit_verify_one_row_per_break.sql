-- audit_verify reports one row for a duplicated seq.
--
-- Where the owner dropped audit_tenant_seq_key and inserted a second
-- record of a seq already sealed, the first pass found the broken link (a
-- seq_gap at that seq) and then reported every record of that seq: two
-- rows, where audit_verify returns the first broken link alone, and
-- `orangerail audit verify` reported one. The broken record is now named
-- by its id as well as its seq.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_verify(p_tenant text)
RETURNS TABLE (seq bigint, problem text, expected_hash bytea, found_hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Past jit_above_cost (a chain of some 400,000 records) Postgres would
-- compile the record check in the leader and in each worker: measured on a
-- 200,000-record chain with compiling forced, it cost more than it saved.
SET jit = off
AS $fn$
DECLARE
    genesis constant bytea := decode(repeat('00', 32), 'hex');
    l_seq     bigint;
    l_problem text;
    l_before  bytea;
    l_id      bigint;
    n         bigint;
BEGIN
    -- Nothing visible is nothing checked, not a whole chain. A tenant's
    -- first record makes its head (so does granting its auditor), so a
    -- tenant with records has a head unless it was deleted; sealed records
    -- without one are the chain's to report (head_mismatch). Only a sealed
    -- record counts: the owner sees every tenant's unsealed records but,
    -- unscoped, no head and no sealed one.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant)
       AND NOT EXISTS (SELECT FROM orangerail.audit a WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL) THEN
        RETURN QUERY SELECT NULL::bigint, 'nothing_visible'::text, NULL::bytea, NULL::bytea;
        RETURN;
    END IF;

    -- The first broken link, in seq order: the plan stops at it.
    -- Its row is named by id too: where the owner dropped the seq's
    -- uniqueness, two rows hold that seq, and it is one of them that broke.
    SELECT l.seq, CASE WHEN l.seq <> l.before_seq + 1 THEN 'seq_gap' ELSE 'prev_hash_mismatch' END, l.before_hash, l.id
    INTO l_seq, l_problem, l_before, l_id
    FROM (
        SELECT a.seq, a.prev_hash, a.id,
               lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
               lag(a.hash, 1, genesis) OVER w AS before_hash
        FROM orangerail.audit a
        WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL
        WINDOW w AS (ORDER BY a.seq)
    ) l
    WHERE l.seq <> l.before_seq + 1 OR l.prev_hash IS DISTINCT FROM l.before_hash
    ORDER BY l.seq
    LIMIT 1;

    -- The first record before it whose hash or columns are not its own.
    -- Its links are sound, so its prev_hash is the hash before it. The one
    -- row comes out only once every record is read: an entry that raises
    -- leaves nothing returned for the walk below to repeat.
    BEGIN
        RETURN QUERY
        SELECT r.seq, CASE WHEN r.hash IS DISTINCT FROM x.expected THEN 'hash_mismatch' ELSE 'column_mismatch' END, x.expected, r.hash
        FROM (
            SELECT min(c.seq) FILTER (WHERE (
                c.hash = sha256(c.prev_hash || int8send(c.seq) || sha256(c.entry))
                AND CASE
                    -- The columns as the entry must spell them (its
                    -- members read as text; absent, JSON null, or not an
                    -- object above them is NULL, so not true). A type is
                    -- asked where the column's text could spell another
                    -- JSON type (a number, true); no other JSON value
                    -- reads as the time's, the kind's or the id's text.
                    WHEN (c.j->>'tenant' = c.tenant_id AND jsonb_typeof(c.j->'tenant') = 'string'
                      AND c.j->>'at' = to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                      AND c.j->>'correlation_id' = c.correlation_id AND jsonb_typeof(c.j->'correlation_id') = 'string'
                      AND c.j->>'phase' = c.phase AND jsonb_typeof(c.j->'phase') = 'string'
                      AND c.j @> CASE WHEN c.dev_mode THEN '{"v": 1, "dev_mode": true}'::jsonb WHEN NOT c.dev_mode THEN '{"v": 1, "dev_mode": false}'::jsonb END
                      AND c.j->'actor'->>'subject' = c.actor AND jsonb_typeof(c.j->'actor'->'subject') = 'string'
                      AND c.j->'actor'->>'kind' = c.actor_kind
                      AND CASE WHEN c.action IS NULL THEN NOT c.j ? 'action'
                               ELSE c.j->>'action' = c.action AND jsonb_typeof(c.j->'action') = 'string' END
                      AND CASE WHEN c.approval_id IS NULL THEN NOT c.j ? 'approval_id'
                               ELSE c.j->>'approval_id' = c.approval_id::text END) IS NOT TRUE THEN false
                    -- What the entry's rules ask of a value, asked of the
                    -- column it equals: the time's span (to_char writes no
                    -- era and a fifth digit past 9999), the id's length,
                    -- the phase's form ^[a-z][a-z_]{0,63}$ (its first
                    -- character, its length in ASCII, nothing but a-z and
                    -- _), a subject, an actor kind.
                    WHEN (c.at >= '0001-01-01 00:00:00+00' AND c.at < '10000-01-01 00:00:00+00'
                      AND length(c.correlation_id) BETWEEN 1 AND 128
                      AND ascii(c.phase) BETWEEN 97 AND 122 AND octet_length(c.phase) <= 64
                      AND btrim(c.phase, 'abcdefghijklmnopqrstuvwxyz_') = ''
                      AND c.actor <> '' AND c.actor_kind IN ('agent', 'human', 'operator', 'system')) IS NOT TRUE THEN false
                    -- json keeps repeated members, jsonb keeps the last.
                    -- With no backslash in the entry (no escape can spell a
                    -- name twice) and as many colons in it as in its
                    -- jsonb's text, no member was dropped at any depth: a
                    -- dropped one takes its name's colon with it, and a
                    -- string's colons are the same in both.
                    WHEN strpos(c.doc, '\') = 0
                      AND octet_length(c.doc) - octet_length(replace(c.doc, ':', ''))
                        = octet_length(c.t) - octet_length(replace(c.t, ':', '')) THEN true
                    -- Else the members of the two objects that matter are
                    -- counted. With its objects' braces made brackets and
                    -- its colons commas, a JSON object is an array of its
                    -- names and values, repeated ones too: twice as long as
                    -- it has members.
                    ELSE json_array_length(translate(c.doc, ':{}', ',[]')::json)
                           = 2 * jsonb_array_length(jsonb_path_query_array(c.j, '$.keyvalue()'))
                      AND json_array_length(translate((c.doc::json->'actor')::text, ':{}', ',[]')::json)
                           = 2 * jsonb_array_length(jsonb_path_query_array(c.j, '$.actor.keyvalue()'))
                END) IS NOT TRUE) AS seq
            -- The entry is parsed once and its jsonb made text once: a
            -- set-returning function in a subquery's select list keeps the
            -- subquery from being folded into the query above, which would
            -- repeat the parse at each use. unnest of one element returns it.
            FROM (
                SELECT p.*, unnest(ARRAY[p.j::text]) AS t
                FROM (
                    SELECT a.seq, a.prev_hash, a.hash, a.entry, a.tenant_id, a.at, a.correlation_id, a.phase, a.action,
                           a.actor, a.actor_kind, a.dev_mode, a.approval_id,
                           convert_from(a.entry, 'UTF8') AS doc,
                           unnest(ARRAY[convert_from(a.entry, 'UTF8')::jsonb]) AS j
                    FROM orangerail.audit a
                    WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL AND a.seq < coalesce(l_seq, 9223372036854775807)
                ) p
            ) c
        ) f
        JOIN orangerail.audit r ON r.tenant_id = p_tenant AND r.seq = f.seq
        CROSS JOIN LATERAL (SELECT sha256(r.prev_hash || int8send(r.seq) || sha256(coalesce(r.entry, ''::bytea))) AS expected) x;
        GET DIAGNOSTICS n = ROW_COUNT;
    EXCEPTION WHEN OTHERS THEN
        -- Some entry is not even UTF-8 JSON: Postgres cannot read it
        -- without raising. Only a tamperer writes one, so only then does
        -- the walk go row by row, each row's columns checked under a guard
        -- of their own, and report the first problem of any kind.
        RETURN QUERY
        SELECT k.seq, k.problem, k.expected, k.hash
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash IS DISTINCT FROM c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash IS DISTINCT FROM l.expected THEN 'hash_mismatch'
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
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || sha256(coalesce(c.entry, ''::bytea))) AS expected) l
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
        GET DIAGNOSTICS n = ROW_COUNT;
    END;
    IF n > 0 THEN
        RETURN;
    END IF;

    IF l_seq IS NOT NULL THEN
        RETURN QUERY
        SELECT b.seq, l_problem, sha256(l_before || int8send(b.seq) || sha256(coalesce(b.entry, ''::bytea))), b.hash
        FROM orangerail.audit b
        WHERE b.tenant_id = p_tenant AND b.seq = l_seq AND b.id = l_id;
        RETURN;
    END IF;

    -- The head must name the last row.
    RETURN QUERY
    WITH last_link AS (
        SELECT coalesce((SELECT b.seq FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), 0) AS seq,
               coalesce((SELECT b.hash FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), genesis) AS hash
    ), head AS (
        -- A missing head is the genesis link (a headless tenant whose
        -- records were sealed: head_mismatch at seq 0); a head row's
        -- emptied column is compared as it is, never read as genesis.
        SELECT h.seq, h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant
        UNION ALL
        SELECT 0, genesis WHERE NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant)
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
-- Past jit_above_cost (a chain of some 400,000 records) Postgres would
-- compile the record check in the leader and in each worker: measured on a
-- 200,000-record chain with compiling forced, it cost more than it saved.
SET jit = off
AS $fn$
DECLARE
    genesis constant bytea := decode(repeat('00', 32), 'hex');
    l_seq     bigint;
    l_problem text;
    l_before  bytea;
    n         bigint;
BEGIN
    -- Nothing visible is nothing checked, not a whole chain. A tenant's
    -- first record makes its head (so does granting its auditor), so a
    -- tenant with records has a head unless it was deleted; sealed records
    -- without one are the chain's to report (head_mismatch). Only a sealed
    -- record counts: the owner sees every tenant's unsealed records but,
    -- unscoped, no head and no sealed one.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant)
       AND NOT EXISTS (SELECT FROM orangerail.audit a WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL) THEN
        RETURN QUERY SELECT NULL::bigint, 'nothing_visible'::text, NULL::bytea, NULL::bytea;
        RETURN;
    END IF;

    -- The first broken link, in seq order: the plan stops at it.
    SELECT l.seq, CASE WHEN l.seq <> l.before_seq + 1 THEN 'seq_gap' ELSE 'prev_hash_mismatch' END, l.before_hash
    INTO l_seq, l_problem, l_before
    FROM (
        SELECT a.seq, a.prev_hash,
               lag(a.seq, 1, 0::bigint) OVER w AS before_seq,
               lag(a.hash, 1, genesis) OVER w AS before_hash
        FROM orangerail.audit a
        WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL
        WINDOW w AS (ORDER BY a.seq)
    ) l
    WHERE l.seq <> l.before_seq + 1 OR l.prev_hash IS DISTINCT FROM l.before_hash
    ORDER BY l.seq
    LIMIT 1;

    -- The first record before it whose hash or columns are not its own.
    -- Its links are sound, so its prev_hash is the hash before it. The one
    -- row comes out only once every record is read: an entry that raises
    -- leaves nothing returned for the walk below to repeat.
    BEGIN
        RETURN QUERY
        SELECT r.seq, CASE WHEN r.hash IS DISTINCT FROM x.expected THEN 'hash_mismatch' ELSE 'column_mismatch' END, x.expected, r.hash
        FROM (
            SELECT min(c.seq) FILTER (WHERE (
                c.hash = sha256(c.prev_hash || int8send(c.seq) || sha256(c.entry))
                AND CASE
                    -- The columns as the entry must spell them (its
                    -- members read as text; absent, JSON null, or not an
                    -- object above them is NULL, so not true). A type is
                    -- asked where the column's text could spell another
                    -- JSON type (a number, true); no other JSON value
                    -- reads as the time's, the kind's or the id's text.
                    WHEN (c.j->>'tenant' = c.tenant_id AND jsonb_typeof(c.j->'tenant') = 'string'
                      AND c.j->>'at' = to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                      AND c.j->>'correlation_id' = c.correlation_id AND jsonb_typeof(c.j->'correlation_id') = 'string'
                      AND c.j->>'phase' = c.phase AND jsonb_typeof(c.j->'phase') = 'string'
                      AND c.j @> CASE WHEN c.dev_mode THEN '{"v": 1, "dev_mode": true}'::jsonb WHEN NOT c.dev_mode THEN '{"v": 1, "dev_mode": false}'::jsonb END
                      AND c.j->'actor'->>'subject' = c.actor AND jsonb_typeof(c.j->'actor'->'subject') = 'string'
                      AND c.j->'actor'->>'kind' = c.actor_kind
                      AND CASE WHEN c.action IS NULL THEN NOT c.j ? 'action'
                               ELSE c.j->>'action' = c.action AND jsonb_typeof(c.j->'action') = 'string' END
                      AND CASE WHEN c.approval_id IS NULL THEN NOT c.j ? 'approval_id'
                               ELSE c.j->>'approval_id' = c.approval_id::text END) IS NOT TRUE THEN false
                    -- What the entry's rules ask of a value, asked of the
                    -- column it equals: the time's span (to_char writes no
                    -- era and a fifth digit past 9999), the id's length,
                    -- the phase's form ^[a-z][a-z_]{0,63}$ (its first
                    -- character, its length in ASCII, nothing but a-z and
                    -- _), a subject, an actor kind.
                    WHEN (c.at >= '0001-01-01 00:00:00+00' AND c.at < '10000-01-01 00:00:00+00'
                      AND length(c.correlation_id) BETWEEN 1 AND 128
                      AND ascii(c.phase) BETWEEN 97 AND 122 AND octet_length(c.phase) <= 64
                      AND btrim(c.phase, 'abcdefghijklmnopqrstuvwxyz_') = ''
                      AND c.actor <> '' AND c.actor_kind IN ('agent', 'human', 'operator', 'system')) IS NOT TRUE THEN false
                    -- json keeps repeated members, jsonb keeps the last.
                    -- With no backslash in the entry (no escape can spell a
                    -- name twice) and as many colons in it as in its
                    -- jsonb's text, no member was dropped at any depth: a
                    -- dropped one takes its name's colon with it, and a
                    -- string's colons are the same in both.
                    WHEN strpos(c.doc, '\') = 0
                      AND octet_length(c.doc) - octet_length(replace(c.doc, ':', ''))
                        = octet_length(c.t) - octet_length(replace(c.t, ':', '')) THEN true
                    -- Else the members of the two objects that matter are
                    -- counted. With its objects' braces made brackets and
                    -- its colons commas, a JSON object is an array of its
                    -- names and values, repeated ones too: twice as long as
                    -- it has members.
                    ELSE json_array_length(translate(c.doc, ':{}', ',[]')::json)
                           = 2 * jsonb_array_length(jsonb_path_query_array(c.j, '$.keyvalue()'))
                      AND json_array_length(translate((c.doc::json->'actor')::text, ':{}', ',[]')::json)
                           = 2 * jsonb_array_length(jsonb_path_query_array(c.j, '$.actor.keyvalue()'))
                END) IS NOT TRUE) AS seq
            -- The entry is parsed once and its jsonb made text once: a
            -- set-returning function in a subquery's select list keeps the
            -- subquery from being folded into the query above, which would
            -- repeat the parse at each use. unnest of one element returns it.
            FROM (
                SELECT p.*, unnest(ARRAY[p.j::text]) AS t
                FROM (
                    SELECT a.seq, a.prev_hash, a.hash, a.entry, a.tenant_id, a.at, a.correlation_id, a.phase, a.action,
                           a.actor, a.actor_kind, a.dev_mode, a.approval_id,
                           convert_from(a.entry, 'UTF8') AS doc,
                           unnest(ARRAY[convert_from(a.entry, 'UTF8')::jsonb]) AS j
                    FROM orangerail.audit a
                    WHERE a.tenant_id = p_tenant AND a.seq IS NOT NULL AND a.seq < coalesce(l_seq, 9223372036854775807)
                ) p
            ) c
        ) f
        JOIN orangerail.audit r ON r.tenant_id = p_tenant AND r.seq = f.seq
        CROSS JOIN LATERAL (SELECT sha256(r.prev_hash || int8send(r.seq) || sha256(coalesce(r.entry, ''::bytea))) AS expected) x;
        GET DIAGNOSTICS n = ROW_COUNT;
    EXCEPTION WHEN OTHERS THEN
        -- Some entry is not even UTF-8 JSON: Postgres cannot read it
        -- without raising. Only a tamperer writes one, so only then does
        -- the walk go row by row, each row's columns checked under a guard
        -- of their own, and report the first problem of any kind.
        RETURN QUERY
        SELECT k.seq, k.problem, k.expected, k.hash
        FROM (
            SELECT c.seq, c.hash, l.expected,
                   CASE
                       WHEN c.seq <> c.before_seq + 1 THEN 'seq_gap'
                       WHEN c.prev_hash IS DISTINCT FROM c.before_hash THEN 'prev_hash_mismatch'
                       WHEN c.hash IS DISTINCT FROM l.expected THEN 'hash_mismatch'
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
            CROSS JOIN LATERAL (SELECT sha256(c.before_hash || int8send(c.seq) || sha256(coalesce(c.entry, ''::bytea))) AS expected) l
        ) k
        WHERE k.problem IS NOT NULL
        ORDER BY k.seq
        LIMIT 1;
        GET DIAGNOSTICS n = ROW_COUNT;
    END;
    IF n > 0 THEN
        RETURN;
    END IF;

    IF l_seq IS NOT NULL THEN
        RETURN QUERY
        SELECT b.seq, l_problem, sha256(l_before || int8send(b.seq) || sha256(coalesce(b.entry, ''::bytea))), b.hash
        FROM orangerail.audit b
        WHERE b.tenant_id = p_tenant AND b.seq = l_seq;
        RETURN;
    END IF;

    -- The head must name the last row.
    RETURN QUERY
    WITH last_link AS (
        SELECT coalesce((SELECT b.seq FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), 0) AS seq,
               coalesce((SELECT b.hash FROM orangerail.audit b WHERE b.tenant_id = p_tenant AND b.seq IS NOT NULL ORDER BY b.seq DESC LIMIT 1), genesis) AS hash
    ), head AS (
        -- A missing head is the genesis link (a headless tenant whose
        -- records were sealed: head_mismatch at seq 0); a head row's
        -- emptied column is compared as it is, never read as genesis.
        SELECT h.seq, h.hash FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant
        UNION ALL
        SELECT 0, genesis WHERE NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant)
    )
    SELECT head.seq, 'head_mismatch'::text, last_link.hash, head.hash
    FROM head, last_link
    WHERE (head.seq, head.hash) IS DISTINCT FROM (last_link.seq, last_link.hash);
END
$fn$;
-- +goose StatementEnd
