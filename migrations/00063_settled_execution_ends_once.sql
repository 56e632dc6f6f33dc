-- An execution an operator settled records no end of its own after the
-- settle, and no settle stands beside an end it recorded: README's "no
-- settle ever stands beside an end the execution records itself".
--
-- `orangerail audit settle` refuses an execution started less than its
-- limits' bound ago, but the bound counts the effect's deadline and one
-- transaction for the end, not the wait for that transaction's connection
-- (a pool every connection of which is busy waits up to the limits'
-- deadline), nor a start whose COMMIT's answer was late: an execution
-- could record execution_succeeded after an operator had settled it
-- failed, and the agent was told it succeeded. A settle's check and its
-- record were also not serialized with the end's record: an end that
-- committed between them stood beside it.
--
-- Now every record that finishes an execution (execution_succeeded,
-- execution_failed, execution_settled) takes, as it is inserted, the lock
-- a settle holds (pg_advisory_xact_lock on 'orangerail.settle:TENANT:
-- CORRELATION'), so a settle and the end wait on each other, and an
-- execution's own end after a settle of it is refused (ORA10): the
-- execution answers outcome_unknown, which the settle already explains.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_end_after_settle() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NEW.phase IN ('execution_succeeded', 'execution_failed', 'execution_settled') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('orangerail.settle:' || NEW.tenant_id || ':' || NEW.correlation_id, 0));
        IF NEW.phase <> 'execution_settled' AND EXISTS (
            SELECT FROM orangerail.audit s
            WHERE s.tenant_id = NEW.tenant_id AND s.correlation_id = NEW.correlation_id AND s.phase = 'execution_settled'
              AND NOT EXISTS (
                  SELECT FROM orangerail.audit r
                  WHERE r.tenant_id = s.tenant_id AND r.correlation_id = s.correlation_id AND r.phase = 'execution_started'
                    AND (coalesce(r.seq, 9223372036854775807), r.id) > (coalesce(s.seq, 9223372036854775807), s.id))) THEN
            RAISE EXCEPTION 'execution % of tenant % was settled by an operator: its own end (%) is not recorded beside the settle',
                NEW.correlation_id, NEW.tenant_id, NEW.phase USING ERRCODE = 'ORA10';
        END IF;
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd
CREATE TRIGGER audit_end_after_settle BEFORE INSERT ON orangerail.audit
    FOR EACH ROW EXECUTE FUNCTION orangerail.audit_end_after_settle();
ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_end_after_settle;

-- +goose Down
DROP TRIGGER audit_end_after_settle ON orangerail.audit;
DROP FUNCTION orangerail.audit_end_after_settle();
