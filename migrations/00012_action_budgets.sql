-- Call budgets: how many of an action's executions a tenant has spent this
-- minute and this day, and the executions running now, shared by every
-- replica (internal/engine/budget.go). One row per tenant and action holds
-- the current minute's and day's counts (UTC windows); spending locks it,
-- so two replicas spending at once are counted one after the other. A
-- running execution holds a lease, deleted when it ends however it ends;
-- a replica that dies mid-execution cannot delete its lease, which stops
-- counting at expires_at, so a slot never leaks. Both are logged tables: a
-- day's budget must survive a crash.

-- +goose Up
CREATE TABLE orangerail.budget_counts (
    tenant_id    text        NOT NULL,
    action       text        NOT NULL,
    minute_start timestamptz NOT NULL,
    minute_calls integer     NOT NULL CHECK (minute_calls >= 0),
    day_start    timestamptz NOT NULL,
    day_calls    integer     NOT NULL CHECK (day_calls >= 0),
    PRIMARY KEY (tenant_id, action)
);

CREATE TABLE orangerail.budget_leases (
    tenant_id      text        NOT NULL,
    action         text        NOT NULL,
    id             uuid        NOT NULL,
    correlation_id text        NOT NULL,
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, action, id)
);

ALTER TABLE orangerail.budget_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.budget_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY budget_counts_tenant ON orangerail.budget_counts TO orangerail_runtime
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));
ALTER TABLE orangerail.budget_leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE orangerail.budget_leases FORCE ROW LEVEL SECURITY;
CREATE POLICY budget_leases_tenant ON orangerail.budget_leases TO orangerail_runtime
    USING (tenant_id = current_setting('orangerail.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('orangerail.tenant_id', true));

REVOKE ALL ON orangerail.budget_counts, orangerail.budget_leases FROM PUBLIC;
-- The runtime counts and refunds, and never rewrites which tenant and
-- action a count is of; it takes and releases leases, and never extends one.
GRANT SELECT, INSERT ON orangerail.budget_counts TO orangerail_runtime;
GRANT UPDATE (minute_start, minute_calls, day_start, day_calls) ON orangerail.budget_counts TO orangerail_runtime;
GRANT SELECT, INSERT, DELETE ON orangerail.budget_leases TO orangerail_runtime;

-- +goose Down
DROP TABLE orangerail.budget_leases;
DROP TABLE orangerail.budget_counts;
