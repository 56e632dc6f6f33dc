-- The polls every replica sends on a timer cost Postgres less, for the
-- same answers. A sealer asks audit_unsealed_tenants every sealing
-- interval (50 ms by default), a webhook worker webhook_outbox_due_tenants
-- every poll, busy or idle. Each was a SQL function that is SECURITY
-- DEFINER, which Postgres never inlines: its query was parsed and planned
-- again at every call. As plpgsql, its statement is prepared once per
-- session, as 00023 did for approval_consume. Measured with pgbench
-- (prepared, one connection, the function alone): audit_unsealed_tenants
-- 141-262 µs a call as SQL, 62-83 µs as plpgsql.

-- +goose Up
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
CREATE OR REPLACE FUNCTION orangerail.webhook_outbox_due_tenants(p_now timestamptz, p_limit integer)
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT o.tenant_id FROM orangerail.webhook_outbox o
    WHERE o.state = 'queued' AND o.next_attempt_at <= p_now AND (o.locked_until IS NULL OR o.locked_until <= p_now)
    GROUP BY o.tenant_id
    ORDER BY min(o.next_attempt_at)
    LIMIT p_limit;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unsealed_tenants(p_limit integer)
RETURNS TABLE (tenant_id text, oldest timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT a.tenant_id, min(a.at) FROM orangerail.audit a
    WHERE a.seq IS NULL
    GROUP BY a.tenant_id
    ORDER BY 2
    LIMIT p_limit
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.webhook_outbox_due_tenants(p_now timestamptz, p_limit integer)
RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT o.tenant_id FROM orangerail.webhook_outbox o
    WHERE o.state = 'queued' AND o.next_attempt_at <= p_now AND (o.locked_until IS NULL OR o.locked_until <= p_now)
    GROUP BY o.tenant_id
    ORDER BY min(o.next_attempt_at)
    LIMIT p_limit
$fn$;
-- +goose StatementEnd
