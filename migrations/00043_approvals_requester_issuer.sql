-- An approval belongs to the caller who staged it: the same subject of the
-- same issuer. The approvals table kept the subject alone (requested_by),
-- so with two issuers configured, a subject of one was served another
-- issuer's same-named subject's approvals: its poll read and executed
-- them, check_approval and the approval resource showed them, and an
-- identical call of theirs was answered with the other's open approval
-- (approvals_open_call_idx was keyed on the subject). Four-eyes already
-- told the two apart, by reading the issuer back from the staged record.
--
-- requested_issuer is the issuer the staged record names ('' when it names
-- none: a caller no issuer vouched for, stdio's development identity or
-- the CLI). approval_stage takes it from the record itself (every
-- overload, so a replica not yet upgraded stores it too), so the record
-- describes it by construction; like the rest of the staged call it never
-- changes (approvals_lifecycle). Existing approvals are filled in from
-- their staged records.
--
-- Idempotency keys were filed the same way, under the subject alone: a
-- same-named subject of another issuer sending the same key to the same
-- action was answered with the other caller's filed result. They are now
-- filed under the issuer too (idempotency_keys.issuer, in the key);
-- existing ones are filled in from the first record of their call
-- (correlation_id), and one whose call left none expires as '' (no issuer
-- is served that). A replica still running the binary before this
-- migration claims keys under the old primary key, which no longer exists:
-- its idempotent calls fail (internal_error, nothing run) until it is
-- replaced.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_entry_issuer(p_entry bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(convert_from(p_entry, 'UTF8')::json -> 'actor' ->> 'issuer', '')
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.audit_entry_issuer(bytea) FROM PUBLIC;

ALTER TABLE orangerail.approvals ADD COLUMN requested_issuer text NOT NULL DEFAULT '';

-- Fill in the issuer of every approval staged so far, tenant by tenant
-- (the owner's row policies read one tenant at a time). The lifecycle
-- trigger, which refuses any change but a status's, is off for it.
ALTER TABLE orangerail.approvals DISABLE TRIGGER approvals_lifecycle;
-- +goose StatementBegin
DO $fill$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT id FROM orangerail.tenants LOOP
        PERFORM set_config('orangerail.tenant_id', t, true);
        UPDATE orangerail.approvals p SET requested_issuer = s.issuer
        FROM (SELECT DISTINCT ON (a.approval_id) a.approval_id, orangerail.audit_entry_issuer(a.entry) AS issuer
              FROM orangerail.audit a
              WHERE a.tenant_id = t AND a.phase = 'staged' AND a.approval_id IS NOT NULL
              ORDER BY a.approval_id, a.id) s
        WHERE p.tenant_id = t AND p.id = s.approval_id AND s.issuer <> '';
    END LOOP;
    PERFORM set_config('orangerail.tenant_id', '', true);
END
$fill$;
-- +goose StatementEnd
ALTER TABLE orangerail.approvals ENABLE TRIGGER approvals_lifecycle;

DROP INDEX orangerail.approvals_open_call_idx;
CREATE UNIQUE INDEX approvals_open_call_idx ON orangerail.approvals (tenant_id, requested_by, requested_issuer, action, input_digest)
    WHERE status IN ('pending', 'approved');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approvals_lifecycle() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF ROW(NEW.id, NEW.tenant_id, NEW.action, NEW.requested_by, NEW.requested_issuer, NEW.input::text, NEW.input_digest,
           NEW.definition_hash, NEW.created_at, NEW.expires_at, NEW.input_key_id, NEW.input_sealed)
       IS DISTINCT FROM
       ROW(OLD.id, OLD.tenant_id, OLD.action, OLD.requested_by, OLD.requested_issuer, OLD.input::text, OLD.input_digest,
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, requested_issuer, input, input_digest,
                                      definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, orangerail.audit_entry_issuer(p_entry), p_input, p_input_digest,
                p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd

ALTER TABLE orangerail.idempotency_keys ADD COLUMN issuer text NOT NULL DEFAULT '';
-- The runtime's policy is the only one: the owner reads the keys with row
-- security not forced on it, for the fill, in this transaction.
ALTER TABLE orangerail.idempotency_keys NO FORCE ROW LEVEL SECURITY;
-- +goose StatementBegin
DO $fill$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT id FROM orangerail.tenants LOOP
        PERFORM set_config('orangerail.tenant_id', t, true);
        UPDATE orangerail.idempotency_keys k
        SET issuer = coalesce((SELECT orangerail.audit_entry_issuer(a.entry) FROM orangerail.audit a
                               WHERE a.tenant_id = t AND a.correlation_id = k.correlation_id
                               ORDER BY a.id LIMIT 1), '')
        WHERE k.tenant_id = t AND k.correlation_id IS NOT NULL;
    END LOOP;
    PERFORM set_config('orangerail.tenant_id', '', true);
END
$fill$;
-- +goose StatementEnd
ALTER TABLE orangerail.idempotency_keys FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey,
    ADD PRIMARY KEY (tenant_id, action, subject, issuer, key);

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orangerail.approval_stage(p_id uuid, p_action text, p_requested_by text, p_input json,
    p_input_digest bytea, p_definition_hash bytea, p_expires_at timestamptz, p_entry bytea)
RETURNS SETOF orangerail.approvals
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text := orangerail.approval_tenant();
    r        orangerail.approvals;
BEGIN
    INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
        VALUES (p_id, v_tenant, p_action, p_requested_by, p_input, p_input_digest, p_definition_hash, p_expires_at)
        RETURNING * INTO r;
    PERFORM orangerail.approval_record(p_entry, p_id, 'staged', p_action, p_requested_by);
    RETURN NEXT r;
END
$fn$;
-- +goose StatementEnd
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
    r        orangerail.approvals;
BEGIN
    -- Read first: an INSERT … ON CONFLICT of a row that exists costs a
    -- speculative insertion, at every stage of the tenant's life.
    IF NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = v_tenant) THEN
        INSERT INTO orangerail.tenants (id) VALUES (v_tenant) ON CONFLICT DO NOTHING;
    END IF;
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

-- Below, an open call and an idempotency key are keyed by the subject
-- alone. Open approvals of one subject's same call staged by callers of
-- two issuers, or live keys that differ by their issuer alone, would fail
-- the unique index or the primary key (23505, naming no row): the rollback
-- is refused first, naming them (ORA09), and changes nothing. Such keys
-- that expired answer no retry: they are dropped. The owner reads every
-- tenant's rows with row security not forced on it, in this transaction
-- only.
ALTER TABLE orangerail.approvals NO FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.idempotency_keys NO FORCE ROW LEVEL SECURITY;
-- +goose StatementBegin
DO $apart$
DECLARE
    listed text;
BEGIN
    SELECT string_agg(o.id::text, ', ' ORDER BY o.created_at) INTO listed
    FROM (SELECT id, created_at FROM (
              SELECT a.id, a.created_at,
                     -- An issuer's requester has one open call of each (the Up's index): more are of more issuers.
                     count(*) OVER (PARTITION BY a.tenant_id, a.requested_by, a.action, a.input_digest) AS issuers
              FROM orangerail.approvals a WHERE a.status IN ('pending', 'approved')) c
          WHERE c.issuers > 1 ORDER BY c.created_at LIMIT 10) o;
    IF listed IS NOT NULL THEN
        RAISE EXCEPTION 'open approvals of one subject''s same call were staged by callers of two issuers (%), which this version cannot keep apart: decide them, or let them lapse and a serving replica''s sweeper mark them expired, then roll back', listed
            USING ERRCODE = 'ORA09', HINT = 'Before migration 00043 an open call is keyed by its subject alone.';
    END IF;
    DELETE FROM orangerail.idempotency_keys k
    WHERE k.expires_at <= now()
      AND EXISTS (SELECT FROM orangerail.idempotency_keys o
                  WHERE (o.tenant_id, o.action, o.subject, o.key) = (k.tenant_id, k.action, k.subject, k.key) AND o.issuer <> k.issuer);
    SELECT string_agg(format('%s of %s to %s (tenant %s)', quote_literal(d.key), quote_literal(d.subject), d.action, d.tenant_id), ', ') INTO listed
    FROM (SELECT k.tenant_id, k.action, k.subject, k.key FROM orangerail.idempotency_keys k
          GROUP BY k.tenant_id, k.action, k.subject, k.key HAVING count(*) > 1
          ORDER BY max(k.expires_at) LIMIT 10) d;
    IF listed IS NOT NULL THEN
        RAISE EXCEPTION 'idempotency keys sent by same-named subjects of two issuers are live (%), which this version cannot keep apart: roll back once they expire', listed
            USING ERRCODE = 'ORA09', HINT = 'A key expires limits.idempotency_ttl after its call (24h by default).';
    END IF;
END
$apart$;
-- +goose StatementEnd
ALTER TABLE orangerail.approvals FORCE ROW LEVEL SECURITY;
ALTER TABLE orangerail.idempotency_keys FORCE ROW LEVEL SECURITY;
DROP INDEX orangerail.approvals_open_call_idx;
CREATE UNIQUE INDEX approvals_open_call_idx ON orangerail.approvals (tenant_id, requested_by, action, input_digest)
    WHERE status IN ('pending', 'approved');
ALTER TABLE orangerail.approvals DROP COLUMN requested_issuer;
DROP FUNCTION orangerail.audit_entry_issuer(bytea);
ALTER TABLE orangerail.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE orangerail.idempotency_keys ADD PRIMARY KEY (tenant_id, action, subject, key),
    DROP COLUMN issuer;
