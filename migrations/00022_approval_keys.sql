-- The key ring (internal/keyring), and sealed inputs at rest
-- (approvals.seal_inputs, internal/inputseal).
--
-- An approval names the key that made its input digest. input_key_id is
-- the kid of that key; NULL is the legacy key, the one server key of the
-- releases before rings, so every approval staged before this migration
-- keeps verifying under it. The kid only selects the key at execution (the
-- digest is checked under the key the approval names, so an approval
-- staged before a rotation executes after it); like the rest of the staged
-- call it never changes.
--
-- A sealed approval holds no input: input is NULL, input_sealed holds it
-- AES-256-GCM encrypted under a data key of its own, and input_data_key
-- that data key, wrapped under a key derived from the ring key
-- input_key_id names (the key active at staging). Crypto-shredding deletes
-- the data key (input_data_key NULL, input_shredded_at set), which the
-- lifecycle trigger allows once, and only for an approval that ended
-- (consumed, rejected, expired): what is left cannot be decrypted by
-- anyone. approval_shred_inputs does it for the transaction's tenant, for
-- approvals that ended before a time the caller names (the retention is
-- the service's config, not the database's). The audit chain never held
-- the sealed input (its records carry the digest), so it verifies as
-- before.
--
-- approval_stage gains an overload that stores the kid and the sealed
-- input. The older one stays: a replica not yet upgraded stages under the
-- legacy key, in plaintext, which is what a NULL kid and input_sealed say.
--
-- Down fails while a sealed approval exists (input cannot be NOT NULL
-- again): an input that was sealed is never written back in plaintext.

-- +goose Up
ALTER TABLE orangerail.approvals
    ADD COLUMN input_key_id text
        CONSTRAINT approvals_input_key_id_shape CHECK (input_key_id ~ '^[a-z0-9][a-z0-9_-]{0,31}$' AND input_key_id <> 'legacy'),
    ALTER COLUMN input DROP NOT NULL,
    ADD COLUMN input_sealed      bytea,
    ADD COLUMN input_data_key    bytea,
    ADD COLUMN input_shredded_at timestamptz,
    -- Exactly one of the plaintext and the sealed input is held.
    ADD CONSTRAINT approvals_input_held CHECK ((input IS NULL) = (input_sealed IS NOT NULL)),
    -- A sealed input has its data key until it is shredded, and only then
    -- a shredding time; a plaintext one has neither.
    ADD CONSTRAINT approvals_data_key_held CHECK (
        CASE WHEN input_sealed IS NULL THEN input_data_key IS NULL AND input_shredded_at IS NULL
             ELSE (input_data_key IS NULL) = (input_shredded_at IS NOT NULL) END);

-- The sealed inputs a sweep may shred: those still holding a data key.
CREATE INDEX approvals_unshredded_idx ON orangerail.approvals (tenant_id, status) WHERE input_data_key IS NOT NULL;

-- Approval rows keep what was staged (the kid and the sealed input now
-- included); only status and decision move, and only forward; and an
-- ended approval's data key may be deleted, once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_lifecycle() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF ROW(NEW.id, NEW.tenant_id, NEW.action, NEW.requested_by, NEW.input::text, NEW.input_digest,
           NEW.definition_hash, NEW.created_at, NEW.expires_at, NEW.input_key_id, NEW.input_sealed)
       IS DISTINCT FROM
       ROW(OLD.id, OLD.tenant_id, OLD.action, OLD.requested_by, OLD.input::text, OLD.input_digest,
           OLD.definition_hash, OLD.created_at, OLD.expires_at, OLD.input_key_id, OLD.input_sealed) THEN
        RAISE EXCEPTION 'an approval''s staged call cannot change' USING ERRCODE = 'ORA04';
    END IF;
    IF ROW(NEW.input_data_key, NEW.input_shredded_at) IS DISTINCT FROM ROW(OLD.input_data_key, OLD.input_shredded_at) THEN
        IF OLD.status NOT IN ('consumed', 'rejected', 'expired') OR OLD.input_data_key IS NULL
           OR NEW.input_data_key IS NOT NULL OR NEW.input_shredded_at IS NULL
           OR ROW(NEW.status, NEW.decided_by, NEW.decided_at, NEW.decision_note, NEW.consumed_at)
              IS DISTINCT FROM ROW(OLD.status, OLD.decided_by, OLD.decided_at, OLD.decision_note, OLD.consumed_at) THEN
            RAISE EXCEPTION 'a sealed input is shredded once its approval ended, by deleting its data key and nothing else'
                USING ERRCODE = 'ORA04';
        END IF;
        RETURN NEW;
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

-- p_input is NULL exactly when p_input_sealed and p_input_data_key hold
-- the sealed input (approvals_input_held refuses anything else).
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_input_key_id text, p_input_sealed bytea, p_input_data_key bytea,
    p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
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
                                      input_sealed, input_data_key, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_input_key_id,
                p_input_sealed, p_input_data_key, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

-- approval_shred_inputs deletes the data keys of at most p_limit of the
-- transaction's tenant's sealed inputs whose approvals ended (consumed,
-- rejected, expired) at or before p_ended_before, and returns how many.
-- A row another transaction holds is left to the next sweep.
-- +goose StatementBegin
CREATE FUNCTION orangerail.approval_shred_inputs(p_ended_before timestamptz, p_limit integer)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH ended AS (
        SELECT a.id FROM orangerail.approvals a
        WHERE a.tenant_id = orangerail.approval_tenant() AND a.input_data_key IS NOT NULL
          AND a.status IN ('consumed', 'rejected', 'expired')
          AND CASE a.status WHEN 'consumed' THEN a.consumed_at WHEN 'rejected' THEN a.decided_at ELSE a.expires_at END
              <= p_ended_before
        ORDER BY a.created_at, a.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), shredded AS (
        UPDATE orangerail.approvals a SET input_data_key = NULL, input_shredded_at = now()
        FROM ended WHERE a.id = ended.id
        RETURNING 1
    )
    SELECT count(*) FROM shredded
$fn$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, bytea, bytea, timestamptz, bytea),
    orangerail.approval_shred_inputs(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, bytea, bytea, timestamptz, bytea),
    orangerail.approval_shred_inputs(timestamptz, integer)
    TO orangerail_runtime;

-- +goose Down
-- An open approval staged under a ring key names the key that made its
-- digest in input_key_id; without the column it would be checked under the
-- legacy key and refused as tampered (signature_mismatch) when it runs.
-- Such a database is refused, naming them: decide them, or let them
-- lapse, first. So is one holding a sealed input, which this version
-- cannot hold (input is NOT NULL below), shredded or not. The owner reads
-- every tenant's approvals with row security not forced on it, in this
-- transaction only.
ALTER TABLE orangerail.approvals NO FORCE ROW LEVEL SECURITY;
-- +goose StatementBegin
DO $keyed$
DECLARE
    listed text;
BEGIN
    SELECT string_agg(a.id::text, ', ' ORDER BY a.created_at) INTO listed
    FROM (SELECT id, created_at FROM orangerail.approvals
          WHERE status IN ('pending', 'approved') AND input_key_id IS NOT NULL
          ORDER BY created_at LIMIT 10) a;
    IF listed IS NOT NULL THEN
        RAISE EXCEPTION 'open approvals were staged under a key of the ring (%), which this version cannot name: decide them, or let them lapse and a serving replica''s sweeper mark them expired, then roll back', listed
            USING ERRCODE = 'ORA09', HINT = 'Before migration 00022 every digest is the legacy key''s; these would be refused as tampered when they run.';
    END IF;
    SELECT string_agg(a.id::text, ', ' ORDER BY a.created_at) INTO listed
    FROM (SELECT id, created_at FROM orangerail.approvals WHERE input_sealed IS NOT NULL ORDER BY created_at LIMIT 10) a;
    IF listed IS NOT NULL THEN
        RAISE EXCEPTION 'approvals hold sealed inputs (%), which this version cannot hold: it keeps every input in the clear', listed
            USING ERRCODE = 'ORA09', HINT = 'Roll back no further than migration 00022 while any approval has a sealed input, shredded or not.';
    END IF;
END
$keyed$;
-- +goose StatementEnd
ALTER TABLE orangerail.approvals FORCE ROW LEVEL SECURITY;
DROP FUNCTION orangerail.approval_shred_inputs(timestamptz, integer);
DROP FUNCTION orangerail.approval_stage(uuid, text, text, json, bytea, text, bytea, bytea, bytea, timestamptz, bytea);

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

DROP INDEX orangerail.approvals_unshredded_idx;
ALTER TABLE orangerail.approvals
    DROP CONSTRAINT approvals_data_key_held,
    DROP CONSTRAINT approvals_input_held,
    DROP COLUMN input_shredded_at,
    DROP COLUMN input_data_key,
    DROP COLUMN input_sealed,
    ALTER COLUMN input SET NOT NULL,
    DROP COLUMN input_key_id;
