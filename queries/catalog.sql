-- name: CatalogTableExists :one
-- Whether a (quoted, possibly schema-qualified) table name resolves.
SELECT (to_regclass(@table_name::text) IS NOT NULL)::boolean AS found;

-- name: CatalogTableColumns :many
SELECT a.attname::text AS column_name
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = to_regclass(@table_name::text) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;
