-- Finished webhook messages are deleted once their retention has passed.
--
-- The outbox kept every message for good: a delivered or failed one is
-- never claimed again, but stayed, two to four rows an approval, in a
-- table nothing trimmed. A message is finished when it was delivered (at
-- delivered_at) or its attempts ran out (failed, its last attempt at
-- next_attempt_at); the delivery worker now deletes the finished messages
-- whose last attempt is older than its retention (webhooks.Config's
-- Retention, 30 days unless set), a batch at a time, through
-- webhook_outbox_prune. A queued message is never deleted: it is still
-- owed to an endpoint. `webhooks redeliver` queues a finished one again,
-- within the retention.
--
-- Before 00044 an instance whose config named no webhook queued every
-- event all the same, and the first endpoint configured would have been
-- sent that backlog, stale. A queued message no worker ever attempted and
-- whose event is more than a day old is that backlog (a worker attempts a
-- message within seconds): it is marked failed, not sent, and kept the
-- retention from now, so `webhooks redeliver` can still queue one again.
--
-- The runtime still deletes nothing itself: the function is the one rule
-- of what may go, and runs as the owner, whose row security lets it
-- delete a finished message and nothing else.

-- +goose Up
CREATE INDEX webhook_outbox_finished_idx ON orangerail.webhook_outbox ((coalesce(delivered_at, next_attempt_at)))
    WHERE state <> 'queued';

CREATE POLICY webhook_outbox_owner_prune ON orangerail.webhook_outbox FOR DELETE TO CURRENT_USER
    USING (state <> 'queued');

-- The owner's row security (FORCE, when the owner is no superuser) lets
-- it read the outbox, not change it: a policy for this update alone.
CREATE POLICY webhook_outbox_owner_retire ON orangerail.webhook_outbox FOR UPDATE TO CURRENT_USER
    USING (true);
UPDATE orangerail.webhook_outbox
SET state = 'failed', next_attempt_at = now(),
    last_error = 'queued while no endpoint was configured, and never attempted: not sent (migration 00045)'
WHERE state = 'queued' AND attempts = 0 AND occurred_at < now() - interval '1 day';
DROP POLICY webhook_outbox_owner_retire ON orangerail.webhook_outbox;

-- +goose StatementBegin
CREATE FUNCTION orangerail.webhook_outbox_prune(p_before timestamptz, p_limit integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer;
BEGIN
    -- The oldest first, at most p_limit: one short transaction a batch.
    -- Replicas pruning at once may pick the same rows; the second waits
    -- for the first's delete and finds them gone.
    DELETE FROM orangerail.webhook_outbox o
    WHERE o.id IN (SELECT d.id FROM orangerail.webhook_outbox d
                   WHERE d.state <> 'queued' AND coalesce(d.delivered_at, d.next_attempt_at) < p_before
                   ORDER BY coalesce(d.delivered_at, d.next_attempt_at)
                   LIMIT p_limit)
      AND o.state <> 'queued';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.webhook_outbox_prune(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.webhook_outbox_prune(timestamptz, integer) TO orangerail_runtime;

-- +goose Down
DROP FUNCTION orangerail.webhook_outbox_prune(timestamptz, integer);
DROP POLICY webhook_outbox_owner_prune ON orangerail.webhook_outbox;
DROP INDEX orangerail.webhook_outbox_finished_idx;
