-- How long a record has waited for its seal is measured by the database's
-- clock, from when the record was written, not by its writer's.
--
-- audit_unsealed (the verifiers' finding of a record unsealed past the
-- bound), audit_unsealed_tenants (which tenants a sealer serves first) and
-- the seal-lag metric read a record's "at": the time in its entry, which
-- is its writer's clock. A replica whose clock runs ahead hid its records
-- from the finding (one a year ahead was not reported for a year, and was
-- sealed last), and one whose clock runs behind raised the finding for a
-- record written a moment ago. Each record now carries written_at, the
-- database's clock when it was inserted (clock_timestamp(), a default no
-- append names: audit_insert lists the columns it writes), and the wait is
-- now() - written_at. A record written before this migration has none, and
-- its wait is read from its "at", as before.
--
-- The column is added without a default and given one after, so that no
-- existing row is rewritten: a chain of any length migrates at once.
-- written_at is not part of the entry (the chain does not cover it), as
-- sealed_at is not; the seal may not change it.

-- +goose Up
ALTER TABLE orangerail.audit ADD COLUMN written_at timestamptz;
ALTER TABLE orangerail.audit ALTER COLUMN written_at SET DEFAULT clock_timestamp();
COMMENT ON COLUMN orangerail.audit.written_at IS
    'When the record was inserted, by the database''s clock (NULL for records written before migration 00030): what its wait for a seal is measured from. Not covered by the chain.';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_seal_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.seq IS NULL AND NEW.seq IS NOT NULL AND NEW.sealed_at IS NOT NULL
       AND ROW(NEW.id, NEW.tenant_id, NEW.entry, NEW.at, NEW.correlation_id, NEW.phase, NEW.action, NEW.actor,
               NEW.actor_kind, NEW.dev_mode, NEW.approval_id, NEW.written_at)
           IS NOT DISTINCT FROM
           ROW(OLD.id, OLD.tenant_id, OLD.entry, OLD.at, OLD.correlation_id, OLD.phase, OLD.action, OLD.actor,
               OLD.actor_kind, OLD.dev_mode, OLD.approval_id, OLD.written_at) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'ORA01';
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed(p_tenant text, p_bound interval)
RETURNS TABLE (correlation_id text, phase text, action text, at timestamptz, unsealed_for interval)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.correlation_id, a.phase, a.action, a.at, now() - coalesce(a.written_at, a.at)
    FROM orangerail.audit a
    WHERE a.tenant_id = p_tenant AND a.seq IS NULL AND coalesce(a.written_at, a.at) < now() - p_bound
    ORDER BY a.id
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed_tenants(p_limit integer)
RETURNS TABLE (tenant_id text, oldest timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, min(coalesce(a.written_at, a.at)) FROM orangerail.audit a
    WHERE a.seq IS NULL
    GROUP BY a.tenant_id
    ORDER BY 2
    LIMIT p_limit;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed_tenants(p_limit integer)
RETURNS TABLE (tenant_id text, oldest timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT a.tenant_id, min(a.at) FROM orangerail.audit a
    WHERE a.seq IS NULL
    GROUP BY a.tenant_id
    ORDER BY 2
    LIMIT p_limit;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed(p_tenant text, p_bound interval)
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_seal_only() RETURNS trigger
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

ALTER TABLE orangerail.audit DROP COLUMN written_at;
