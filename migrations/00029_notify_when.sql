-- The webhook outbox's trigger runs only for the changes it announces.
--
-- approvals_notify ran after every insert into orangerail.approvals and
-- every update of an approval's status, and decided in plpgsql whether the
-- change was one to announce: a SECURITY DEFINER call, and its
-- expressions set up anew in each transaction, for the consume that ends
-- every executed approval too, which announces nothing. Two triggers now
-- say when in their WHEN clauses, which Postgres evaluates without calling
-- the function, and queues no after-trigger event when they are false:
--
--   approvals_notify_pending  after an insert of a pending approval
--   approvals_notify_decided  after a status changed to approved,
--                             rejected or expired
--
-- The function writes the message of the status the approval now has
-- (approval.pending, approval.approved, …): the same messages, in the
-- same transactions, as before.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_notify() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    INSERT INTO orangerail.webhook_outbox (tenant_id, approval_id, event, action, requested_by,
                                           decided_by, decided_at, expires_at)
        VALUES (NEW.tenant_id, NEW.id, 'approval.' || NEW.status, NEW.action, NEW.requested_by,
                NEW.decided_by, NEW.decided_at, NEW.expires_at);
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

DROP TRIGGER approvals_notify ON orangerail.approvals;
CREATE TRIGGER approvals_notify_pending AFTER INSERT ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION orangerail.approvals_notify();
CREATE TRIGGER approvals_notify_decided AFTER UPDATE OF status ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('approved', 'rejected', 'expired'))
    EXECUTE FUNCTION orangerail.approvals_notify();
-- Replica mode (session_replication_role) skips neither.
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_pending;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_decided;

-- +goose Down
DROP TRIGGER approvals_notify_decided ON orangerail.approvals;
DROP TRIGGER approvals_notify_pending ON orangerail.approvals;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_notify() RETURNS trigger
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
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify;
