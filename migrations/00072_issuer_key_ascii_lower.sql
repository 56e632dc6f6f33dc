-- issuer_key (00067) lower-cased an issuer's scheme and host with lower(),
-- which follows the collation of its argument: the database's default for
-- idempotency_keys_canonical_idx (00069) and approval_stage's lookup. Under
-- a Turkish or Azerbaijani collation (a database created with such a
-- locale, libc or ICU) lower('I') is 'ı' (U+0131), so HTTPS://IDP.EXAMPLE
-- was filed under https://ıdp.example — a form ontology.IssuerKey never
-- gives, which the engine's key (https://idp.example) does not find — and
-- called one issuer with https://ıdp.example, another host, which its
-- regular expression keeps as it is: looser than SameIssuer. An index on
-- a function whose answer follows a setting is not immutable.
--
-- The issuer is now matched and lower-cased under the "C" collation,
-- whose lower() changes ASCII letters alone, as strings.ToLower does on
-- the ASCII scheme and host the expression admits. Under every other
-- collation the answer is unchanged; the index is rebuilt for a database
-- whose default collation gave another. A key 00069 filed under such a
-- form keeps it (which spelling it had is not kept): it is found only
-- until it expires, under the spelling it was filed from.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.issuer_key(p_issuer text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((
        SELECT lower(m[1]) || '://' || lower(m[2])
               || CASE WHEN (lower(m[1]), m[3]) IN (('https', ':443'), ('http', ':80')) THEN '' ELSE coalesce(m[3], '') END
               || rtrim(coalesce(m[4], ''), '/')
        FROM regexp_match(p_issuer COLLATE "C", '^([A-Za-z][A-Za-z0-9+.-]*)://([A-Za-z0-9._~-]+)(:[0-9]*)?((?:/(?:[A-Za-z0-9._~!$&''()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*)$') m
    ), p_issuer)
$fn$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $do$
BEGIN
    -- Rebuilt only where the default collation lower-cases an ASCII
    -- letter otherwise: elsewhere every entry is what it was.
    IF lower('ABCDEFGHIJKLMNOPQRSTUVWXYZ') <> 'abcdefghijklmnopqrstuvwxyz' THEN
        REINDEX INDEX orangerail.idempotency_keys_canonical_idx;
    END IF;
END
$do$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.issuer_key(p_issuer text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((
        SELECT lower(m[1]) || '://' || lower(m[2])
               || CASE WHEN (lower(m[1]), m[3]) IN (('https', ':443'), ('http', ':80')) THEN '' ELSE coalesce(m[3], '') END
               || rtrim(coalesce(m[4], ''), '/')
        FROM regexp_match(p_issuer, '^([A-Za-z][A-Za-z0-9+.-]*)://([A-Za-z0-9._~-]+)(:[0-9]*)?((?:/(?:[A-Za-z0-9._~!$&''()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*)$') m
    ), p_issuer)
$fn$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $do$
BEGIN
    -- Rebuilt only where the default collation lower-cases an ASCII
    -- letter otherwise: elsewhere every entry is what it was.
    IF lower('ABCDEFGHIJKLMNOPQRSTUVWXYZ') <> 'abcdefghijklmnopqrstuvwxyz' THEN
        REINDEX INDEX orangerail.idempotency_keys_canonical_idx;
    END IF;
END
$do$;
-- +goose StatementEnd
