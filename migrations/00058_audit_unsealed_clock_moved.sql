-- audit_unsealed lists a record whose clock was moved or emptied.
--
-- A record's wait for its seal is read from written_at (else its "at"),
-- columns the chain does not cover. The database's owner could hide a
-- record held back from the seal — one no chain covers, so changed at
-- will — by moving written_at into the future, or by emptying written_at
-- and at (a NULL wait compares as not past the bound): the verifiers
-- counted it pending and `orangerail audit verify` reported OK. Neither is
-- legitimate: written_at is the database's clock at insert, so a record a
-- snapshot sees was written before it, and only the owner empties a
-- column. A record whose time is past the bound on either side, or
-- missing, is now listed; a missing time reads as the epoch (as the
-- unsealed pages read it), a future one as a negative wait.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed(p_tenant text, p_bound interval)
RETURNS TABLE (correlation_id text, phase text, action text, at timestamptz, unsealed_for interval)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.correlation_id, a.phase, a.action, a.at, now() - w.written
    FROM orangerail.audit a
    CROSS JOIN LATERAL (SELECT coalesce(a.written_at, a.at, 'epoch'::timestamptz) AS written) w
    WHERE a.tenant_id = p_tenant AND a.seq IS NULL
      AND (w.written < now() - p_bound OR w.written > now() + p_bound)
    ORDER BY a.id
$fn$;
-- +goose StatementEnd

-- +goose Down
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
