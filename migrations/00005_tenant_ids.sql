-- Tenant ids lose ':' and '@'. The alphabet is now letters, digits, '.',
-- '_' and '-', first a letter or digit, at most 128 characters: no
-- character that any key orangerail builds from a tenant id uses as a
-- separator can appear in one. internal/database.ValidateTenantID holds Go
-- to the same pattern; a test keeps the two equal.
--
-- A database already holding a tenant id outside the new alphabet is not
-- changed: the migration fails and names one such id, since renaming a
-- tenant (its approvals, its audit chain, its auditor grants) is the
-- operator's decision, never a migration's.

-- +goose Up
-- +goose StatementBegin
DO $check$
DECLARE
    v_count   bigint;
    v_example text;
BEGIN
    SELECT count(*), min(id) INTO v_count, v_example
    FROM orangerail.tenants
    WHERE id !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    IF v_count > 0 THEN
        RAISE EXCEPTION '% tenant id(s) hold '':'' or ''@'', which tenant ids may no longer hold (for example %)', v_count, quote_literal(v_example)
            USING ERRCODE = 'check_violation',
                  HINT = 'List them with: SELECT id FROM orangerail.tenants WHERE id !~ ''^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$''. '
                      || 'Move each tenant to an id of letters, digits, ''.'', ''_'' and ''-'' with the binary that wrote it, then migrate again.';
    END IF;
END
$check$;
-- +goose StatementEnd
ALTER TABLE orangerail.tenants DROP CONSTRAINT tenants_id_format;
ALTER TABLE orangerail.tenants ADD CONSTRAINT tenants_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$');

-- +goose Down
-- The old alphabet is a superset of the new: every row satisfies it.
ALTER TABLE orangerail.tenants DROP CONSTRAINT tenants_id_format;
ALTER TABLE orangerail.tenants ADD CONSTRAINT tenants_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$');
