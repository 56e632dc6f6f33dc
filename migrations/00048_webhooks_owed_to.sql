-- A webhook message goes to the endpoints configured when its event
-- happened, never to one configured later.
--
-- A message was sent to whichever endpoints the worker's config named when
-- it delivered, so an endpoint added, or one replacing another (a new URL),
-- was sent every message still queued: events from before it existed, a
-- staging decided long since announced as pending, and (include_input)
-- inputs from before anyone chose to send it them.
--
-- Each message now records in owed_to the endpoints it is owed to: those
-- the engine's config named, subscribed to its event, in the transaction
-- that made the event. The engine sets them in orangerail.webhooks, a JSON
-- object of event to endpoint keys ({"approval.pending": ["9f86d081884c7d65",
-- …], …}; ontology.WebhookRoutes), a key being the first 8 bytes of the SHA-256 of
-- the endpoint's URL in hex: a URL can hold its receiver's secret, and the
-- setting is sent as text with every transaction. An event no endpoint
-- subscribes to is queued for none: no message. 'off' (no endpoint, 00044)
-- queues none as before. Unset, or any other value (an operator's own
-- SQL, a replica not yet upgraded), leaves owed_to NULL: owed to every
-- endpoint subscribed where it is delivered, as every message was before.
--
-- The worker sends a message only to the endpoints it is owed to that are
-- still configured; one whose endpoints are all gone is marked failed,
-- not sent. `webhooks redeliver` sets owed_to NULL: the operator asks for
-- the message to go to the endpoints configured now.

-- +goose Up
ALTER TABLE orangerail.webhook_outbox ADD COLUMN owed_to text[];

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_notify() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_event  text := 'approval.' || NEW.status;
    v_routes text := current_setting('orangerail.webhooks', true);
    v_owed   text[];
BEGIN
    IF left(v_routes, 1) = '{' THEN
        v_owed := ARRAY(SELECT jsonb_array_elements_text(v_routes::jsonb -> v_event));
        IF cardinality(v_owed) = 0 THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO orangerail.webhook_outbox (tenant_id, approval_id, event, action, requested_by,
                                           decided_by, decided_at, expires_at, owed_to)
        VALUES (NEW.tenant_id, NEW.id, v_event, NEW.action, NEW.requested_by,
                NEW.decided_by, NEW.decided_at, NEW.expires_at, v_owed);
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

GRANT UPDATE (owed_to) ON orangerail.webhook_outbox TO orangerail_runtime;

-- +goose Down
REVOKE UPDATE (owed_to) ON orangerail.webhook_outbox FROM orangerail_runtime;

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

ALTER TABLE orangerail.webhook_outbox DROP COLUMN owed_to;
