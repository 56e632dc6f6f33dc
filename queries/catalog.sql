-- name: CatalogTableExists :one
-- Whether a (quoted, possibly schema-qualified) table name resolves.
SELECT (to_regclass(@table_name::text) IS NOT NULL)::boolean AS found;

-- name: CatalogTableColumns :many
-- A table's columns, each with the type its values are compared as: a
-- domain's base type (through domains over domains), else its own; whether
-- it may hold NULL (neither the column nor any domain on the way says NOT
-- NULL); and its type modifier (a varchar's or char's declared length plus
-- 4), the column's own, else the nearest domain's, else -1; and whether
-- that type is an enum; and whether the login may read it (SELECT on the
-- table, or on the column).
WITH RECURSIVE col (attnum, attname, typid, not_null, typmod) AS (
    SELECT a.attnum, a.attname, a.atttypid, a.attnotnull, a.atttypmod
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = to_regclass(@table_name::text) AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT col.attnum, col.attname, t.typbasetype, col.not_null OR t.typnotnull,
           CASE WHEN col.typmod >= 0 THEN col.typmod ELSE t.typtypmod END
    FROM col JOIN pg_catalog.pg_type t ON t.oid = col.typid
    WHERE t.typtype = 'd'
)
SELECT col.attname::text AS column_name, col.typid::int8 AS type_oid,
       (NOT col.not_null)::boolean AS nullable, col.typmod::int4 AS type_modifier,
       (t.typtype = 'e')::boolean AS enum,
       pg_catalog.has_column_privilege(to_regclass(@table_name::text), col.attnum, 'SELECT') AS readable
FROM col JOIN pg_catalog.pg_type t ON t.oid = col.typid
WHERE t.typtype <> 'd'
ORDER BY col.attnum;

-- name: CatalogDatabaseName :one
-- The name of the database the connection reads.
SELECT current_database()::text AS name;

-- name: CatalogScaffoldTables :many
-- Every ordinary or partitioned table (a partition is read through its
-- parent) outside the system schemas and orangerail's own schema, whose
-- approvals and audit records are never an agent's object.
SELECT n.nspname::text AS schema_name, c.relname::text AS table_name
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema' AND n.nspname <> 'orangerail'
ORDER BY 1, 2;

-- name: CatalogShadowingNames :many
-- The name of every relation outside public, of any kind: a bare name is
-- resolved along the search_path to the first relation of that name
-- (a table, a view, a materialized view, a sequence, a foreign table...),
-- and any schema, pg_catalog first, may stand before public on it.
SELECT DISTINCT c.relname::text AS name
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname <> 'public'
ORDER BY 1;

-- name: CatalogSchemaUsable :one
-- Whether the login may use the schema (USAGE), without which it reads
-- none of the schema's tables, their columns included.
SELECT pg_catalog.has_schema_privilege(@schema_name::text, 'USAGE') AS usable;

-- name: CatalogSequencesDenied :many
-- Of the sequences named, each as regclass prints it (as a plan prints
-- nextval('…'::regclass)), those the current role may not take a value
-- from: nextval needs USAGE or UPDATE on the sequence, and asks only as it
-- runs.
SELECT c.oid::regclass::text AS name
FROM pg_catalog.pg_class c
WHERE c.relkind = 'S' AND c.oid::regclass::text = ANY (@names::text[])
  -- has_sequence_privilege refuses a relation of another kind, and the
  -- conditions of a WHERE may be evaluated in any order.
  AND CASE WHEN c.relkind = 'S' THEN NOT pg_catalog.has_sequence_privilege(c.oid, 'USAGE, UPDATE') END
ORDER BY 1;

-- name: CatalogPrimaryKey :many
-- A (quoted, possibly schema-qualified) table's primary key columns, in
-- the key's order; none when it has no primary key.
SELECT a.attname::text AS column_name
FROM pg_catalog.pg_constraint k
JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
WHERE k.conrelid = to_regclass(@table_name::text) AND k.contype = 'p'
ORDER BY array_position(k.conkey, a.attnum);

-- name: CatalogForeignKeys :many
-- A (quoted, possibly schema-qualified) table's foreign keys of one or two
-- columns: its columns, and the schema, table and columns they reference,
-- pair by pair in the key's order.
SELECT k.conname::text AS constraint_name,
       ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum ORDER BY u.ord)::text[] AS column_names,
       rn.nspname::text AS ref_schema, rc.relname::text AS ref_table,
       ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS u(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.attnum ORDER BY u.ord)::text[] AS ref_column_names
FROM pg_catalog.pg_constraint k
JOIN pg_catalog.pg_class rc ON rc.oid = k.confrelid
JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
WHERE k.conrelid = to_regclass(@table_name::text) AND k.contype = 'f' AND cardinality(k.conkey) <= 2
ORDER BY 1;
