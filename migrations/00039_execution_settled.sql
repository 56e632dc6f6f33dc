-- An execution left unfinished — outcome_unknown: an upstream write sent
-- and never answered, the server gone mid-call — can be settled by an
-- operator who found out how it ended (`orangerail audit settle`): an
-- execution_settled record, by the database's owner (the operator guard
-- refuses any other login its operator records), with the outcome found
-- and why. It finishes the execution as execution_succeeded and
-- execution_failed do, for both verifiers; it is listed, with its reason,
-- among the operator's records (audit_break_glass), as a decision taken
-- around the engine is.
--
-- Before it nothing could finish such an execution, so `audit verify` of a
-- tenant that once saw an ambiguous upstream write found it for good.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
RETURNS TABLE (seq bigint, correlation_id text, action text, at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.seq, s.correlation_id, s.action, s.at
    FROM orangerail.audit s
    WHERE s.tenant_id = p_tenant AND s.phase = 'execution_started'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit f
          WHERE f.tenant_id = s.tenant_id AND f.correlation_id = s.correlation_id
            AND (coalesce(f.seq, 9223372036854775807), f.id) > (coalesce(s.seq, 9223372036854775807), s.id)
            AND f.phase IN ('execution_succeeded', 'execution_failed', 'execution_settled'))
    ORDER BY s.seq NULLS LAST, s.id
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.audit_unfinished(p_tenant text)
RETURNS TABLE (seq bigint, correlation_id text, action text, at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT s.seq, s.correlation_id, s.action, s.at
    FROM orangerail.audit s
    WHERE s.tenant_id = p_tenant AND s.phase = 'execution_started'
      AND NOT EXISTS (
          SELECT FROM orangerail.audit f
          WHERE f.tenant_id = s.tenant_id AND f.correlation_id = s.correlation_id
            AND (coalesce(f.seq, 9223372036854775807), f.id) > (coalesce(s.seq, 9223372036854775807), s.id)
            AND f.phase IN ('execution_succeeded', 'execution_failed'))
    ORDER BY s.seq NULLS LAST, s.id
$fn$;
-- +goose StatementEnd
