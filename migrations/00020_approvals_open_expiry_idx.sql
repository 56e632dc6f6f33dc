-- Every stage, decision and poll first expires its tenant's lapsed
-- approvals (ApprovalLapsed), and the sweeper does for each tenant: with
-- only approvals_tenant_status_idx, that read visits every open approval
-- of the tenant, so its cost grew with the approvals waiting. This index
-- holds the open ones by expiry: the read visits the lapsed ones alone.

-- +goose Up
CREATE INDEX approvals_open_expiry_idx ON orangerail.approvals (tenant_id, expires_at)
    WHERE status IN ('pending', 'approved');

-- +goose Down
DROP INDEX orangerail.approvals_open_expiry_idx;
