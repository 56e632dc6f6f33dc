-- The key ring (internal/keyring): an approval names the key that made its
-- input digest. input_key_id is the kid of that key; NULL is the legacy
-- key, the one server key of the releases before rings, so every approval
-- staged before this migration keeps verifying under it. The kid only
-- selects the key at execution (the digest is checked under the key the
-- approval names, so an approval staged before a rotation executes after
-- it); like the rest of the staged call it never changes.
--
-- approval_stage gains an overload that stores the kid. The older one
-- stays: a replica not yet upgraded stages under the legacy key, which is
-- what a NULL kid says.

-- +goose Up
ALTER TABLE orangerail.approvals ADD COLUMN input_key_id text
    CONSTRAINT approvals_input_key_id_shape CHECK (input_key_id ~ '^[a-z0-9][a-z0-9_-]{0,31}$' AND input_key_id <> 'legacy');

-- Approval rows keep what was staged (the kid now included); only status
-- and decision move, and only forward.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_lifecycle() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF ROW(NEW.id, NEW.tenant_id, NEW.action, NEW.requested_by, NEW.input::text, NEW.input_digest,
           NEW.definition_hash, NEW.created_at, NEW.expires_at, NEW.input_key_id)
       IS DISTINCT FROM
       ROW(OLD.id, OLD.tenant_id, OLD.action, OLD.requested_by, OLD.input::text, OLD.input_digest,
           OLD.definition_hash, OLD.created_at, OLD.expires_at, OLD.input_key_id) THEN
        RAISE EXCEPTION 'an approval''s staged call cannot change' USING ERRCODE = 'ORA04';
    END IF;
    IF (OLD.status, NEW.status) NOT IN (('pending', 'approved'), ('pending', 'rejected'), ('pending', 'expired'),
                                        ('approved', 'consumed'), ('approved', 'expired')) THEN
        RAISE EXCEPTION 'an approval cannot move from % to %', OLD.status, NEW.status USING ERRCODE = 'ORA04';
    END IF;
    IF OLD.status <> 'pending'
       AND ROW(NEW.decided_by, NEW.decided_at, NEW.decision_note) IS DISTINCT FROM ROW(OLD.decided_by, OLD.decided_at, OLD.decision_note) THEN
        RAISE EXCEPTION 'an approval is decided once' USING ERRCODE = 'ORA04';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, input_key_id,
                                      definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_input_key_id,
                p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, timestamptz, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, timestamptz, bytea)
    TO orangerail_runtime;

-- +goose Down
DROP FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, timestamptz, bytea);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_lifecycle() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF ROW(NEW.id, NEW.tenant_id, NEW.action, NEW.requested_by, NEW.input::text, NEW.input_digest,
           NEW.definition_hash, NEW.created_at, NEW.expires_at)
       IS DISTINCT FROM
       ROW(OLD.id, OLD.tenant_id, OLD.action, OLD.requested_by, OLD.input::text, OLD.input_digest,
           OLD.definition_hash, OLD.created_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'an approval''s staged call cannot change' USING ERRCODE = 'ORA04';
    END IF;
    IF (OLD.status, NEW.status) NOT IN (('pending', 'approved'), ('pending', 'rejected'), ('pending', 'expired'),
                                        ('approved', 'consumed'), ('approved', 'expired')) THEN
        RAISE EXCEPTION 'an approval cannot move from % to %', OLD.status, NEW.status USING ERRCODE = 'ORA04';
    END IF;
    IF OLD.status <> 'pending'
       AND ROW(NEW.decided_by, NEW.decided_at, NEW.decision_note) IS DISTINCT FROM ROW(OLD.decided_by, OLD.decided_at, OLD.decision_note) THEN
        RAISE EXCEPTION 'an approval is decided once' USING ERRCODE = 'ORA04';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd

ALTER TABLE orangerail.approvals DROP COLUMN input_key_id;
