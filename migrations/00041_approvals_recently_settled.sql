-- The desk's "Recently decided" read each status's newest approvals by the
-- time they were requested, and ordered them so: an approval asked for
-- days ago and decided a minute ago was missing behind twenty newer ones,
-- and those shown were not in the order they were decided. It now reads
-- the approvals that are no longer pending by the time they left pending
-- — approval_settled_at: consumed_at of one consumed, expires_at of one
-- lapsed, decided_at of one approved or rejected — newest first, served by
-- an index of that time.
--
-- The function has no SET search_path, unlike the schema's others: a
-- function with one is never inlined, and inlined, the index's expression
-- and a query's are the same CASE, which the planner matches, with no
-- call per row written. Its body names no object a search path could
-- redirect: a CASE over its arguments and text literals, whose equality
-- is pg_catalog's, searched first whatever the path.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_settled_at(status text, decided_at timestamptz, consumed_at timestamptz, expires_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE status WHEN 'consumed' THEN consumed_at WHEN 'expired' THEN expires_at WHEN 'pending' THEN NULL ELSE decided_at END
$fn$;
-- +goose StatementEnd

GRANT EXECUTE ON FUNCTION orangerail.approval_settled_at(text, timestamptz, timestamptz, timestamptz)
    TO orangerail_runtime, orangerail_auditor, orangerail_readonly;

CREATE INDEX approvals_settled_idx ON orangerail.approvals
    (tenant_id, orangerail.approval_settled_at(status, decided_at, consumed_at, expires_at) DESC, id)
    WHERE status <> 'pending';

-- +goose Down
DROP INDEX orangerail.approvals_settled_idx;
DROP FUNCTION orangerail.approval_settled_at(text, timestamptz, timestamptz, timestamptz);
