-- How many approvals wait for a person now, across tenants, and since when
-- the oldest has waited: what a metrics scrape reads (the queue a team's
-- approvers owe). The runtime reads approvals one tenant at a time under
-- Row Level Security; approvals_pending is the owner's, returns two
-- numbers and never a row.

-- +goose Up
-- The owner reads pending approvals, for approvals_pending alone (as
-- audit_owner_unsealed does for audit_unsealed_tenants).
CREATE POLICY approvals_owner_pending ON orangerail.approvals FOR SELECT TO CURRENT_USER
    USING (status = 'pending');

-- +goose StatementBegin
CREATE FUNCTION orangerail.approvals_pending()
RETURNS TABLE (pending bigint, oldest timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    -- A lapsed approval the sweeper has not yet expired waits for no one.
    SELECT count(*), min(a.created_at) FROM orangerail.approvals a
    WHERE a.status = 'pending' AND a.expires_at > now()
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.approvals_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.approvals_pending() TO orangerail_runtime;

-- +goose Down
DROP FUNCTION orangerail.approvals_pending();
DROP POLICY approvals_owner_pending ON orangerail.approvals;
