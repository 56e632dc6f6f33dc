-- name: CatalogTableExists :one
-- Whether a (quoted, possibly schema-qualified) table name resolves.
SELECT (to_regclass(@table_name::text) IS NOT NULL)::boolean AS found;

-- name: CatalogTableColumns :many
-- A table's columns, each with the type its values are compared as: a
-- domain's base type (through domains over domains), else its own; whether
-- it may hold NULL (neither the column nor any domain on the way says NOT
-- NULL); and its type modifier (a varchar's or char's declared length plus
-- 4), the column's own, else the nearest domain's, else -1.
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
       (NOT col.not_null)::boolean AS nullable, col.typmod::int4 AS type_modifier
FROM col JOIN pg_catalog.pg_type t ON t.oid = col.typid
WHERE t.typtype <> 'd'
ORDER BY col.attnum;
