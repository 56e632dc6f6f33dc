-- An execution's settle lock is a write of its row, not a row lock: a
-- transaction whose snapshot predates the last holder's commit fails to
-- serialize instead of reading the execution as it was before the wait.
--
-- 00063's guarantee (a settle and an execution's own end never both
-- stand) rests on the check each makes after waiting on the lock seeing
-- what the other committed meanwhile: the trigger's EXISTS, the settle's
-- AuditUnfinishedExecution. That holds under READ COMMITTED, where each
-- statement takes a fresh snapshot. Neither the settle nor the execution's
-- transactions name an isolation level: where the database or a role's
-- default_transaction_isolation is repeatable read or serializable, each
-- reads the snapshot its transaction took before the wait. 00068's
-- settle_lock then kept them apart only where it inserted the row (an
-- insert conflicting with a row not in the snapshot fails to serialize):
-- where the row was there before — any correlation id whose earlier
-- execution ended, or was settled — FOR UPDATE of a row another
-- transaction only locked succeeds, and the end stood beside the settle,
-- or two settles stood, each having read the execution unfinished.
--
-- settle_lock now updates the row it finds (ON CONFLICT DO UPDATE, to the
-- same values): the update locks it as FOR UPDATE did, and under repeatable
-- read or serializable a row another transaction changed after this one's
-- snapshot fails to serialize (40001), so the later of the two fails
-- rather than stand beside the other (SettleExecution now begins READ
-- COMMITTED, so a settle reads the end instead; an execution's
-- transactions still take the database's default). Under READ COMMITTED nothing
-- changes but that each taking after the first leaves a dead version of
-- the row (a HOT update, which vacuum reclaims), and the first taker's
-- insert is the whole lock (no second statement locks the row it made).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.settle_lock(p_tenant text, p_correlation text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- Waits (within the lock timeout) for whoever holds it: another's
    -- insert of the row not yet committed, or its update of the row. The
    -- update is the lock, and tells a later snapshot's transaction that
    -- the row changed after it (a serialization failure, where the
    -- isolation level keeps one snapshot for the transaction).
    INSERT INTO orangerail.settle_locks AS l (tenant_id, correlation_id) VALUES (p_tenant, p_correlation)
    ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET correlation_id = l.correlation_id;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.settle_lock(p_tenant text, p_correlation text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- Waits (within the lock timeout) for whoever holds it: another's
    -- insert of the row not yet committed, or its lock of the row.
    INSERT INTO orangerail.settle_locks (tenant_id, correlation_id) VALUES (p_tenant, p_correlation)
    ON CONFLICT (tenant_id, correlation_id) DO NOTHING;
    PERFORM FROM orangerail.settle_locks l WHERE l.tenant_id = p_tenant AND l.correlation_id = p_correlation FOR UPDATE;
END
$fn$;
-- +goose StatementEnd
