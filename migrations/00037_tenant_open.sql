-- A tenant's first writers no longer queue on one another.
--
-- A tenant's first record made its row and its chain's head in the
-- record's own transaction (audit_insert; approval_stage made the row).
-- Another writer of the same new tenant, not seeing them yet, inserted
-- them too, ON CONFLICT DO NOTHING -- which waits for the first
-- transaction's speculative insert to commit or roll back: for as long as
-- that transaction ran (a direct action's effect on the service database
-- runs in the transaction of its first record), or until lock_timeout
-- failed the second call.
--
-- tenant_open makes them in a short transaction of its own, which the
-- engine runs before a tenant's first call on each replica; the write
-- paths then find them committed. audit_insert calls it for a tenant not
-- yet opened (an older replica's write), as before. Granting an auditor
-- (store.TenantOpen) opens the tenant the same way: one rule for what a
-- tenant's opening makes.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.tenant_open() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    -- Read first: ON CONFLICT of a row that exists costs a speculative
    -- insertion. The head is made last, so that its presence means both.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
        INSERT INTO orangerail.audit_heads (tenant_id, seq, hash)
            VALUES (v_tenant, 0, decode(repeat('00', 32), 'hex'))
            ON CONFLICT DO NOTHING;
    END IF;
END
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.tenant_open() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.tenant_open() TO orangerail_runtime;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_insert(p_entry bytea, c orangerail.audit_columns) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    IF c.tenant_id <> v_tenant THEN
        RAISE EXCEPTION 'audit entry names another tenant than this transaction' USING ERRCODE = 'ORA03';
    END IF;
    -- A tenant no replica opened (an older one's first record) is opened
    -- here, in the record's transaction. Its head is read, never locked.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant) THEN
        PERFORM orangerail.tenant_open();
    END IF;
    INSERT INTO orangerail.audit (tenant_id, entry, at, correlation_id, phase, action,
                                  actor, actor_kind, dev_mode, approval_id)
        VALUES (v_tenant, p_entry, c.at, c.correlation_id, c.phase, c.action,
                c.actor, c.actor_kind, c.dev_mode, c.approval_id);
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_insert(p_entry bytea, c orangerail.audit_columns) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := current_setting('orangerail.tenant_id', true);
BEGIN
    IF v_tenant IS NULL OR v_tenant = '' THEN
        RAISE EXCEPTION 'orangerail.tenant_id is not set in this transaction' USING ERRCODE = 'ORA03';
    END IF;
    IF c.tenant_id <> v_tenant THEN
        RAISE EXCEPTION 'audit entry names another tenant than this transaction' USING ERRCODE = 'ORA03';
    END IF;
    -- A tenant's first record makes its head, which its sealers lock. It
    -- is read, never locked, here.
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
        INSERT INTO orangerail.audit_heads (tenant_id, seq, hash)
            VALUES (v_tenant, 0, decode(repeat('00', 32), 'hex'))
            ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.audit (tenant_id, entry, at, correlation_id, phase, action,
                                  actor, actor_kind, dev_mode, approval_id)
        VALUES (v_tenant, p_entry, c.at, c.correlation_id, c.phase, c.action,
                c.actor, c.actor_kind, c.dev_mode, c.approval_id);
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION orangerail.tenant_open();
