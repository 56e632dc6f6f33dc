-- An instance whose config names no webhook queues no webhook message.
--
-- The approvals' triggers (00029) wrote every staging, decision and expiry
-- to orangerail.webhook_outbox whether or not any endpoint would take it.
-- With none configured nothing delivers a message, so each waited there,
-- queued, for good: two rows an approval, and the due index's entries, in
-- a table nothing trims; and the first endpoint configured later was sent
-- the whole backlog, approvals long decided announced as pending. On the
-- way they cost every staging and decision an insert, with its foreign
-- keys' share locks on the tenant's row and on the approval's.
--
-- A transaction that sets orangerail.webhooks to off now queues none: the
-- engine's does where its config names no webhook (database.Bounded's
-- NoWebhooks). Unset, or any other value, queues as before, so a path
-- that does not say so announces, and an instance with webhooks is
-- unchanged. Events are announced from when the config names an endpoint.
-- Rows already queued are left as they were.

-- +goose Up
DROP TRIGGER approvals_notify_pending ON orangerail.approvals;
DROP TRIGGER approvals_notify_decided ON orangerail.approvals;
CREATE TRIGGER approvals_notify_pending AFTER INSERT ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status = 'pending'
                       AND current_setting('orangerail.webhooks', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION orangerail.approvals_notify();
CREATE TRIGGER approvals_notify_decided AFTER UPDATE OF status ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('approved', 'rejected', 'expired')
                       AND current_setting('orangerail.webhooks', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION orangerail.approvals_notify();
-- Replica mode (session_replication_role) skips neither.
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_pending;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_decided;

-- +goose Down
DROP TRIGGER approvals_notify_pending ON orangerail.approvals;
DROP TRIGGER approvals_notify_decided ON orangerail.approvals;
CREATE TRIGGER approvals_notify_pending AFTER INSERT ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION orangerail.approvals_notify();
CREATE TRIGGER approvals_notify_decided AFTER UPDATE OF status ON orangerail.approvals
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('approved', 'rejected', 'expired'))
    EXECUTE FUNCTION orangerail.approvals_notify();
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_pending;
ALTER TABLE orangerail.approvals ENABLE ALWAYS TRIGGER approvals_notify_decided;
