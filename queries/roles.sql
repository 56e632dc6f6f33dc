-- name: RoleGet :one
-- A role's standing as an auditor login: whether it is a member of
-- orangerail_auditor, and whether it holds a power no auditor may hold.
-- No row: there is no such role.
SELECT pg_catalog.pg_has_role(r.rolname, 'orangerail_auditor', 'MEMBER')::bool AS auditor,
       (r.rolsuper OR r.rolbypassrls OR r.rolcreaterole)::bool AS powerful
FROM pg_catalog.pg_roles r
WHERE r.rolname = @role_name::text;

-- name: AuditorGrantAdd :exec
-- Lets an auditor login read a tenant (the tenant must exist).
INSERT INTO orangerail.auditor_grants (role_name, tenant_id) VALUES (@role_name, @tenant_id)
ON CONFLICT DO NOTHING;

-- name: AuditorGrantRemove :exec
DELETE FROM orangerail.auditor_grants WHERE role_name = @role_name AND tenant_id = @tenant_id;

-- name: AuditorGrantedTenants :many
-- The tenants granted to the connection's login, in id order.
SELECT g.tenant_id::text AS tenant_id FROM orangerail.auditor_grants g
WHERE g.role_name = session_user
ORDER BY 1;
