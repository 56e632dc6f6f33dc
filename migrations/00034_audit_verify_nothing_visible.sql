-- audit_verify of a tenant its caller sees nothing of says so.
--
-- It returned no row -- the documented answer for a whole chain -- when the
-- caller could see neither the tenant's head nor any of its records: a
-- tenant that does not exist (an auditor's typo), one not granted to the
-- caller's login, or one that never wrote a record. An auditor read "whole"
-- where nothing was checked. It now returns one row, problem
-- 'nothing_visible', with no seq and no hashes. A tenant whose head the
-- caller sees but whose chain is empty (every record awaiting its seal)
-- still returns no row: its sealed chain, empty, is whole.
--
-- The chain's check is unchanged, under the name audit_verify_chain (its
-- grants go with it); audit_verify asks first whether anything is visible.

-- +goose Up
ALTER FUNCTION orangerail.audit_verify(text) RENAME TO audit_verify_chain;

-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_verify(p_tenant text)
RETURNS TABLE (seq bigint, problem text, expected_hash bytea, found_hash bytea)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- A tenant's first record makes its head, so a tenant with a record
    -- has a head unless it was deleted; records without a head are the
    -- chain's to report (head_mismatch).
    IF NOT EXISTS (SELECT FROM orangerail.audit_heads h WHERE h.tenant_id = p_tenant)
       AND NOT EXISTS (SELECT FROM orangerail.audit a WHERE a.tenant_id = p_tenant) THEN
        RETURN QUERY SELECT NULL::bigint, 'nothing_visible'::text, NULL::bytea, NULL::bytea;
        RETURN;
    END IF;
    RETURN QUERY SELECT v.seq, v.problem, v.expected_hash, v.found_hash FROM orangerail.audit_verify_chain(p_tenant) AS v;
END
$fn$;
-- +goose StatementEnd

-- The new function is callable by exactly the roles that could call the
-- one it wraps.
REVOKE ALL ON FUNCTION orangerail.audit_verify(text) FROM PUBLIC;
-- +goose StatementBegin
DO $grant$
DECLARE
    r regrole;
BEGIN
    FOR r IN
        SELECT a.grantee::regrole
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid = 'orangerail.audit_verify_chain(text)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION orangerail.audit_verify(text) TO %s', r);
    END LOOP;
END
$grant$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION orangerail.audit_verify(text);
ALTER FUNCTION orangerail.audit_verify_chain(text) RENAME TO audit_verify;
