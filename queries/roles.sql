-- name: RoleGet :one
-- A role's standing as an auditor login. A plain auditor, as GrantAuditor
-- makes one, is a direct member of orangerail_auditor, may log in and
-- inherits its grants, holds no power an auditor may not (superuser,
-- bypassing RLS, creating roles or databases, replication), is a member of
-- no other role (orangerail_runtime, the owner, a role of the cluster's)
-- and is named by no object of any database (pg_shdepend: it owns none,
-- is granted none, no policy names it). No row: there is no such role.
SELECT EXISTS (SELECT FROM pg_catalog.pg_auth_members m
               WHERE m.member = r.oid AND m.roleid = 'orangerail_auditor'::pg_catalog.regrole)::bool AS auditor,
       (r.rolcanlogin AND r.rolinherit)::bool AS login,
       (r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication)::bool AS powerful,
       ARRAY(SELECT g.rolname::text FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
             WHERE m.member = r.oid AND g.rolname <> 'orangerail_auditor' ORDER BY 1)::text[] AS other_roles,
       EXISTS (SELECT FROM pg_catalog.pg_shdepend d
               WHERE d.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND d.refobjid = r.oid)::bool AS named_by_objects
FROM pg_catalog.pg_roles r
WHERE r.rolname = @role_name::text;

-- name: AuditorGrantAdd :execrows
-- Lets an auditor login read a tenant (the tenant must exist): 0 rows,
-- it could already.
INSERT INTO orangerail.auditor_grants (role_name, tenant_id) VALUES (@role_name, @tenant_id)
ON CONFLICT DO NOTHING;

-- name: AuditorGrantRemove :execrows
DELETE FROM orangerail.auditor_grants WHERE role_name = @role_name AND tenant_id = @tenant_id;

-- name: AuditorGrantedTenants :many
-- The tenants granted to the connection's login, in id order.
SELECT g.tenant_id::text AS tenant_id FROM orangerail.auditor_grants g
WHERE g.role_name = session_user
ORDER BY 1;

-- name: AuditorGrantList :many
-- Every auditor login's grants (the owner's view), or one tenant's
-- (tenant_id set), or one login's (role_name set), by tenant then login.
SELECT g.role_name::text AS role_name, g.tenant_id::text AS tenant_id FROM orangerail.auditor_grants g
WHERE (@tenant_id::text = '' OR g.tenant_id = @tenant_id::text)
  AND (@role_name::text = '' OR g.role_name = @role_name::text)
ORDER BY g.tenant_id, g.role_name;
