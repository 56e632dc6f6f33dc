-- name: CatalogTableExists :one
-- Whether a (quoted, possibly schema-qualified) table name resolves.
SELECT (to_regclass(@table_name::text) IS NOT NULL)::boolean AS found;

-- name: CatalogTableColumns :many
-- A table's columns, each with the type its values are compared as: a
-- domain's base type (through domains over domains), else its own.
WITH RECURSIVE col (attnum, attname, typid) AS (
    SELECT a.attnum, a.attname, a.atttypid
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = to_regclass(@table_name::text) AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT col.attnum, col.attname, t.typbasetype
    FROM col JOIN pg_catalog.pg_type t ON t.oid = col.typid
    WHERE t.typtype = 'd'
)
SELECT col.attname::text AS column_name, col.typid::int8 AS type_oid
FROM col JOIN pg_catalog.pg_type t ON t.oid = col.typid
WHERE t.typtype <> 'd'
ORDER BY col.attnum;
