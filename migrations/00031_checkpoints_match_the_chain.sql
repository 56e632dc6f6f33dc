-- A stored checkpoint must describe the chain: the database refuses one
-- whose tree is not the tree of the tenant's sealed records.
--
-- Until now the runtime role could insert any checkpoint row. A leaked
-- runtime login could take a size no record has reached yet, so that the
-- signer, finding it taken, left it; or store, at the head, a frontier and
-- root of its own making, consistent with each other: every replica's
-- signer extends the latest stored checkpoint's frontier, so every
-- checkpoint signed after it, with the deployment's real key, would name a
-- tree the chain does not make. `audit verify` reports that
-- (checkpoint_mismatch), but the signed checkpoints would stay wrong.
--
-- Now a BEFORE INSERT trigger requires the note's body to name the row's
-- origin (of the row's tenant), size and root; then extends the frontier
-- of the tenant's stored checkpoint of the largest size below the new one
-- (none: the empty tree; one that is not whole itself -- its frontier's
-- length or fold wrong -- is refused) with the leaves of the sealed
-- records after it, in seq order, up to the new size, and requires that
-- they are all there (seq in order, none missing), that the frontier they
-- make is the new row's, and that it folds to the new row's root. Every
-- comparison is IS DISTINCT FROM: a NULL never passes. The tree is RFC
-- 6962's, as internal/checkpoint reads it: leaf N-1 is sha256(0x00 ||
-- hash of the record of seq N), a node sha256(0x01 || left || right), the
-- frontier the roots of the perfect subtrees left to right, the root their
-- fold from the right. A checkpoint stored after this migration is thereby
-- the chain's as it was when stored, by induction from the empty tree;
-- one stored before it is extended when it is whole, not re-read (`audit
-- verify` holds the chain to the latest).
--
-- It costs the database what the signer already spends reading the same
-- records (about two sha256 a record since the previous checkpoint; the
-- signer takes a tenant's lock, so replicas do not all pay it, and adds at
-- most 2^20 records a checkpoint). The note's signature is not checked
-- here: the database holds no key; auditors check notes against the keys
-- they hold (`audit verify --key`, `audit check-proof`).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orangerail.audit_checkpoints_match_chain() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    prev_size     bigint;
    prev_frontier bytea;
    prev_root     bytea;
    body          text[];
    stack         bytea[] := '{}';
    n             bigint;
    m             bigint;
    leaf          bytea;
    r             record;
    made          bytea := '\x'::bytea;
    root          bytea;
BEGIN
    -- The note's body must name the row's tree, of the row's tenant: a
    -- signature is checked by those who hold the key, but what it signs
    -- is checked here.
    body := string_to_array(split_part(NEW.note, E'\n\n', 1), E'\n');
    IF body[1] IS DISTINCT FROM NEW.origin OR right(NEW.origin, length(NEW.tenant_id) + 1) IS DISTINCT FROM '/' || NEW.tenant_id
       OR body[2] IS DISTINCT FROM NEW.size::text OR body[3] IS DISTINCT FROM encode(NEW.root_hash, 'base64') THEN
        RAISE EXCEPTION 'audit checkpoint of size % for tenant %: its note does not name its origin, size and root', NEW.size, NEW.tenant_id
            USING ERRCODE = 'ORA07';
    END IF;

    SELECT c.size, c.frontier, c.root_hash INTO prev_size, prev_frontier, prev_root
    FROM orangerail.audit_checkpoints c
    WHERE c.tenant_id = NEW.tenant_id AND c.size < NEW.size
    ORDER BY c.size DESC
    LIMIT 1;
    IF NOT FOUND THEN
        prev_size := 0;
        prev_frontier := '\x'::bytea;
    ELSE
        -- The checkpoint extended must be whole itself (one stored before
        -- this check was not checked): a subtree root for each one bit of
        -- its size, folding to its root.
        IF octet_length(prev_frontier) <> 32 * length(replace(prev_size::bit(64)::text, '0', '')) THEN
            RAISE EXCEPTION 'audit checkpoint of size % for tenant %: the checkpoint of size % below it has a frontier of the wrong length', NEW.size, NEW.tenant_id, prev_size
                USING ERRCODE = 'ORA07';
        END IF;
    END IF;
    FOR i IN 0 .. octet_length(prev_frontier) / 32 - 1 LOOP
        stack := stack || substring(prev_frontier FROM i * 32 + 1 FOR 32);
    END LOOP;
    IF prev_size > 0 THEN
        root := stack[cardinality(stack)];
        FOR i IN REVERSE cardinality(stack) - 1 .. 1 LOOP
            root := sha256('\x01'::bytea || stack[i] || root);
        END LOOP;
        IF root IS DISTINCT FROM prev_root THEN
            RAISE EXCEPTION 'audit checkpoint of size % for tenant %: the frontier of the checkpoint of size % below it does not make its root', NEW.size, NEW.tenant_id, prev_size
                USING ERRCODE = 'ORA07';
        END IF;
    END IF;

    n := prev_size;
    FOR r IN
        SELECT a.seq, a.hash FROM orangerail.audit a
        WHERE a.tenant_id = NEW.tenant_id AND a.seq > prev_size AND a.seq <= NEW.size
        ORDER BY a.seq
    LOOP
        IF r.seq <> n + 1 THEN
            RAISE EXCEPTION 'audit checkpoint of size % for tenant %: the sealed records skip from seq % to %', NEW.size, NEW.tenant_id, n, r.seq
                USING ERRCODE = 'ORA07';
        END IF;
        -- Append leaf n: it merges with the subtree roots its index's
        -- trailing one bits name, the smallest first.
        leaf := sha256('\x00'::bytea || r.hash);
        m := n;
        WHILE m & 1 = 1 LOOP
            leaf := sha256('\x01'::bytea || stack[cardinality(stack)] || leaf);
            stack := stack[1:cardinality(stack) - 1];
            m := m >> 1;
        END LOOP;
        stack := stack || leaf;
        n := n + 1;
    END LOOP;
    IF n <> NEW.size THEN
        RAISE EXCEPTION 'audit checkpoint of size % for tenant %: the sealed records stop at seq %', NEW.size, NEW.tenant_id, n
            USING ERRCODE = 'ORA07';
    END IF;

    FOR i IN 1 .. cardinality(stack) LOOP
        made := made || stack[i];
    END LOOP;
    IF made IS DISTINCT FROM NEW.frontier THEN
        RAISE EXCEPTION 'audit checkpoint of size % for tenant %: its frontier is not the tree of the sealed records', NEW.size, NEW.tenant_id
            USING ERRCODE = 'ORA07';
    END IF;
    root := stack[cardinality(stack)];
    FOR i IN REVERSE cardinality(stack) - 1 .. 1 LOOP
        root := sha256('\x01'::bytea || stack[i] || root);
    END LOOP;
    IF root IS DISTINCT FROM NEW.root_hash THEN
        RAISE EXCEPTION 'audit checkpoint of size % for tenant %: its root is not the root of the sealed records', NEW.size, NEW.tenant_id
            USING ERRCODE = 'ORA07';
    END IF;
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION orangerail.audit_checkpoints_match_chain() FROM PUBLIC;

CREATE TRIGGER audit_checkpoints_match_chain BEFORE INSERT ON orangerail.audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION orangerail.audit_checkpoints_match_chain();
-- Replica mode (session_replication_role) does not skip it.
ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_match_chain;

-- +goose Down
DROP TRIGGER audit_checkpoints_match_chain ON orangerail.audit_checkpoints;
DROP FUNCTION orangerail.audit_checkpoints_match_chain();
