-- An identical call's open approval answers the call (approval_stage,
-- 00028), where identical means by the same caller: the same subject of
-- the same issuer (00043). The issuer was compared as the config spelled
-- it, so once the operator re-spelled identity.oidc.issuer (a trailing
-- slash added or removed, the host's case, the default port written out)
-- an identical call staged a second approval, though four-eyes and an
-- approval's owner already hold the two spellings to be one issuer
-- (ontology.SameIssuer). approval_stage now finds the open call under
-- either spelling: the one the record names, or one of the same
-- issuer_key, this function's form of ontology.IssuerKey.
--
-- issuer_key is stricter than ontology.IssuerKey, never looser: it
-- rewrites only an issuer of the plain form scheme://host[:port][/path]
-- (no user, query or fragment, which an OIDC issuer has none of; a host
-- of letters, digits and . _ ~ -; a path of unreserved characters,
-- sub-delims, : @ / and %XX), on which the two agree (the scheme and host
-- in lower case, the default port dropped, trailing slashes dropped), and
-- returns any other string as it is. Two issuers it calls one are so one
-- for SameIssuer too, so a call is never answered with another issuer's
-- caller's approval. requested_issuer is still the record's spelling: the
-- stored rows, and approvals_open_call_idx, are unchanged.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.issuer_key(p_issuer text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((
        SELECT lower(m[1]) || '://' || lower(m[2])
               || CASE WHEN (lower(m[1]), m[3]) IN (('https', ':443'), ('http', ':80')) THEN '' ELSE coalesce(m[3], '') END
               || rtrim(coalesce(m[4], ''), '/')
        FROM regexp_match(p_issuer, '^([A-Za-z][A-Za-z0-9+.-]*)://([A-Za-z0-9._~-]+)(:[0-9]*)?((?:/(?:[A-Za-z0-9._~!$&''()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*)$') m
    ), p_issuer)
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.issuer_key(text) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_input_sealed bytea, p_input_data_key bytea,
    p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    v_issuer text := orangerail.audit_entry_issuer(p_entry);
    r        orangerail.approvals;
BEGIN
    -- An identical call's open approval is the answer: nothing is
    -- staged, and the caller, seeing another id than p_id, knows it
    -- (approvals_open_call_idx holds at most one of each spelling).
    -- Identical means by the same caller: the same subject of the same
    -- issuer, however the config spelled it (issuer_key); the record's
    -- own spelling first.
    SELECT * INTO r FROM orangerail.approvals a
    WHERE a.tenant_id = v_tenant AND a.requested_by = p_requested_by
      AND (a.requested_issuer = v_issuer OR orangerail.issuer_key(a.requested_issuer) = orangerail.issuer_key(v_issuer))
      AND a.action = p_action
      AND a.input_digest = p_input_digest AND a.status IN ('pending', 'approved')
    ORDER BY a.requested_issuer = v_issuer DESC, a.created_at, a.id
    LIMIT 1;
    IF FOUND THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    -- Read first: an INSERT … ON CONFLICT of a row that exists costs a
    -- speculative insertion, at every stage of the tenant's life.
    IF NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, requested_issuer, input, input_digest,
                                      input_key_id, input_sealed, input_data_key, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, v_issuer, p_input, p_input_digest,
                p_input_key_id, p_input_sealed, p_input_data_key, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_input_sealed bytea, p_input_data_key bytea,
    p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    v_issuer text := orangerail.audit_entry_issuer(p_entry);
    r        orangerail.approvals;
BEGIN
    -- An identical call's open approval is the answer: nothing is
    -- staged, and the caller, seeing another id than p_id, knows it
    -- (approvals_open_call_idx holds at most one). Identical means by the
    -- same caller: the same subject of the same issuer.
    SELECT * INTO r FROM orangerail.approvals a
    WHERE a.tenant_id = v_tenant AND a.requested_by = p_requested_by AND a.requested_issuer = v_issuer
      AND a.action = p_action
      AND a.input_digest = p_input_digest AND a.status IN ('pending', 'approved');
    IF FOUND THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    -- Read first: an INSERT … ON CONFLICT of a row that exists costs a
    -- speculative insertion, at every stage of the tenant's life.
    IF NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, requested_issuer, input, input_digest,
                                      input_key_id, input_sealed, input_data_key, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, v_issuer, p_input, p_input_digest,
                p_input_key_id, p_input_sealed, p_input_data_key, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION orangerail.issuer_key(text);
