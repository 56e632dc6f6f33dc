-- An idempotency key's claim is committed before its call runs.
--
-- Until now a first call claimed its key with an INSERT that stayed
-- uncommitted while the call ran, and filed the outcome in the same
-- transaction. A retry waited on the row's lock. But whatever ended that
-- transaction without its COMMIT -- the replica stopped mid-call, its
-- connection cut, a COMMIT lost -- let the key go with the call's effect
-- possibly done, and a retry waiting on the lock then ran the call again.
--
-- Now the claim commits first, naming its call (claim, and the call's
-- correlation id) and how long the call, its last record and the filing
-- of its outcome may take (claimed_until, by the database's clock); the
-- call runs outside any transaction; its outcome is filed by an UPDATE
-- that names the claim. A retry that finds a claim with no outcome waits
-- for one; one that finds the claim's time past with no outcome files
-- outcome_unknown in its place: the call may have run, so no retry under
-- the key runs it again. A call whose outcome says nothing ran gives its
-- key back (DELETE). A key expires idempotency_ttl after its outcome is
-- filed; a claim with no outcome never expires, so that the retry past its
-- time learns the call may have run.
--
-- A replica still running the binary before this migration claims with
-- no claim column set, which the CHECK below refuses: its idempotent calls
-- fail (internal_error, nothing run) until it is replaced.

-- +goose Up
ALTER TABLE orangerail.idempotency_keys
    ADD COLUMN claim uuid,
    ADD COLUMN claimed_until timestamptz,
    ADD COLUMN correlation_id text,
    -- outcome was NULL only inside the claiming transaction, so every
    -- committed row has one; from now on a row without one is a call
    -- running, or abandoned, under its claim.
    ADD CONSTRAINT idempotency_keys_claimed CHECK (outcome IS NOT NULL OR (claim IS NOT NULL AND claimed_until IS NOT NULL));
COMMENT ON COLUMN orangerail.idempotency_keys.outcome IS
    'The call''s result, byte for byte as first answered; NULL while the call that holds the claim runs, or once its claim''s time is over (abandoned: the next retry files outcome_unknown here).';
GRANT UPDATE (claim, claimed_until, correlation_id) ON orangerail.idempotency_keys TO orangerail_runtime;

-- +goose Down
-- A call running under a claim has no outcome to keep.
DELETE FROM orangerail.idempotency_keys WHERE outcome IS NULL;
COMMENT ON COLUMN orangerail.idempotency_keys.outcome IS NULL;
ALTER TABLE orangerail.idempotency_keys
    DROP CONSTRAINT idempotency_keys_claimed,
    DROP COLUMN correlation_id,
    DROP COLUMN claimed_until,
    DROP COLUMN claim;
