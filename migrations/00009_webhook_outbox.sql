-- The webhook outbox: one row per approval event a webhook may announce,
-- written by a trigger on orangerail.approvals in the same transaction as
-- the change it announces.
--
-- The trigger, not the Go code, writes the rows, so no code path that
-- changes an approval (the SECURITY DEFINER functions of 00006, a future
-- one, an operator's break-glass) can forget to, and a change that rolls
-- back (an audit append that failed) leaves no row: nothing is announced
-- that did not happen.
--
-- The events, a closed set held equal to internal/ontology's WebhookEvents
-- by a test:
--   approval.pending   an approval was staged
--   approval.approved  a person approved it
--   approval.rejected  a person rejected it
--   approval.expired   it lapsed before it was decided or consumed
--
-- A row's delivery state: queued (waiting for its next attempt), delivered
-- (every endpoint subscribed to its event answered 2xx), failed (attempts
-- ran out). The delivery worker (internal/webhooks) claims due rows with
-- FOR UPDATE SKIP LOCKED and a lease, so replicas never claim one row at
-- once; it changes only the delivery columns, and never inserts or deletes.

-- +goose Up
CREATE TABLE orangerail.webhook_outbox (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The order events happened in, within a transaction too (two changes
    -- of one transaction share its now()).
    seq             bigint      NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    tenant_id       text        NOT NULL REFERENCES orangerail.tenants (id),
    approval_id     uuid        NOT NULL REFERENCES orangerail.approvals (id),
    event           text        NOT NULL
        CHECK (event IN ('approval.pending', 'approval.approved', 'approval.rejected', 'approval.expired')),
    -- What the approval was when the event happened: a later change makes
    -- an event of its own and never rewrites this one's payload.
    action          text        NOT NULL,
    requested_by    text        NOT NULL,
    decided_by      text,
    decided_at      timestamptz,
    expires_at      timestamptz NOT NULL,
    occurred_at     timestamptz NOT NULL DEFAULT now(),
    state           text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- A claimed row is leased to one worker until then; a worker that died
    -- mid-delivery lets it go when the lease ends (at-least-once).
    locked_until    timestamptz,
    -- The endpoints (by URL) that already answered 2xx: a retry sends only
    -- to the others.
    delivered_to    text[]      NOT NULL DEFAULT '{}',
    last_error      text,
    delivered_at    timestamptz,
    CONSTRAINT webhook_outbox_delivered_whole CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);
CREATE INDEX webhook_outbox_due_idx ON orangerail.webhook_outbox (tenant_id, next_attempt_at, seq) WHERE state = 'queued';
CREATE INDEX webhook_outbox_tenant_idx ON orangerail.webhook_outbox (tenant_id, seq DESC);

-- +goose StatementBegin
CREATE FUNCTION orangerail.approvals_notify() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_event text;
BEGIN
    IF TG_OP = 'INSERT' AND NEW.status = 'pending' THEN
        v_event := 'approval.pending';
    ELSIF TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('approved', 'rejected', 'expired') THEN
        v_event := 'approval.' || NEW.status;
    END IF;
    IF v_event IS NOT NULL THEN
        INSERT INTO orangerail.webhook_outbox (tenant_id, approval_id, event, action, requested_by,
                                               decided_by, decided_at, expires_at)
            VALUES (NEW.tenant_id, NEW.id, v_event, NEW.action, NEW.requested_by,
                    NEW.decided_by, NEW.decided_at, NEW.expires_at);
    END IF;
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

CREATE TRIGGER approvals_notify AFTER INSERT OR UPDATE OF status ON orangerail.approvals
    FOR EACH ROW EXECUTE FUNCTION orangerail.approvals_notify();
-- Replica mode (session_replication_role) does not skip it.
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify;

-- webhook_outbox_due_tenants names the tenants with a row due at p_now, so
-- the worker can claim each tenant's rows in a transaction scoped to that
-- tenant. It returns tenant ids only, which the runtime may read anyway
-- (orangerail.tenants).
-- +goose StatementBegin
CREATE FUNCTION orangerail.webhook_outbox_due_tenants(p_now timestamptz, p_limit integer)
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

ALTER TABLE orangerail.webhook_outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.webhook_outbox FORCE ROW LEVEL SECURITY;
-- The runtime, and the trigger acting as the owner, see the tenant their
-- transaction names.
CREATE POLICY webhook_outbox_tenant ON orangerail.webhook_outbox TO orangerail_runtime, CURRENT_USER
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));
-- The owner reads every tenant's rows, for webhook_outbox_due_tenants
-- alone: the owner could lift RLS on its own table anyway, and the
-- function returns tenant ids, never a row.
CREATE POLICY webhook_outbox_owner_read ON orangerail.webhook_outbox FOR SELECT TO CURRENT_USER
    USING (true);

REVOKE ALL ON orangerail.webhook_outbox FROM PUBLIC;
REVOKE ALL ON FUNCTION orangerail.approvals_notify(), orangerail.webhook_outbox_due_tenants(timestamptz, integer) FROM PUBLIC;
-- The runtime reads, claims and marks rows: it changes the delivery
-- columns only, and never inserts (the trigger does) or deletes.
GRANT SELECT ON orangerail.webhook_outbox TO orangerail_runtime;
GRANT UPDATE (state, attempts, next_attempt_at, locked_until, delivered_to, last_error, delivered_at)
    ON orangerail.webhook_outbox TO orangerail_runtime;
GRANT EXECUTE ON FUNCTION orangerail.webhook_outbox_due_tenants(timestamptz, integer) TO orangerail_runtime;

-- +goose Down
DROP TRIGGER approvals_notify ON orangerail.approvals;
DROP FUNCTION orangerail.approvals_notify();
DROP FUNCTION orangerail.webhook_outbox_due_tenants(timestamptz, integer);
DROP TABLE orangerail.webhook_outbox;
