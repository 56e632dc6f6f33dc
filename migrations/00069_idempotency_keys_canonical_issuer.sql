-- An idempotency key is filed under its caller's issuer in the one form
-- every spelling of it shares (ontology.IssuerKey, since 00067's version);
-- a key an earlier version filed holds the issuer as the config spelled
-- it. The engine looked such a key up under the spelling the config has
-- now, so once the operator re-spelled the issuer (https://idp.example/
-- to https://idp.example) before the key expired, a retry missed it and
-- ran the call again; and a replica under each spelling could claim one
-- key twice, one row per spelling, and both run.
--
-- Every stored key is now filed under issuer_key(issuer) (00067: never
-- looser than ontology.IssuerKey, on whose plain issuers it agrees; any
-- other string it keeps as it is), and a unique index on that form holds
-- one key of each canonical issuer: the engine claims against it (ON
-- CONFLICT on its expression) and reads a key by it, so that a key a
-- replica not yet upgraded files under its own spelling during a rolling
-- upgrade is the one every spelling finds, and two claims under two
-- spellings meet, the second finding the first. A replica before this
-- migration claims against the primary key: should its spelling's key
-- meet another's in the index, its claim fails (23505; internal_error,
-- nothing run), where it would have run the call a second time.
--
-- Two stored keys of one canonical issuer (filed under two spellings, by
-- a version before 00067's, or one each side of the upgrade) are one key:
-- one is kept, decided in this order, and the others dropped: a live one
-- (unexpired, or a claim with no outcome, which never expires) before an
-- expired one, which answers no retry; a filed outcome before a claim with
-- none, so that a retry gets the answer rather than wait; one already in
-- the canonical form, which this version's replicas answer from; then the
-- lowest issuer, byte by byte. A call running under a dropped claim still
-- runs; its filing finds its key gone (the host log says so) and a retry
-- is answered by the key kept, whose call ran too.
--
-- The runtime may now execute issuer_key: the index evaluates it on every
-- key the runtime files, and the engine's statements name it.

-- +goose Up
-- The runtime's policy is the only one: the owner reads and rewrites every
-- tenant's keys with row security not forced on it, in this transaction.
ALTER TABLE orangerail.idempotency_keys NO FORCE ROW LEVEL SECURITY;
DELETE FROM orangerail.idempotency_keys k
USING (SELECT r.tenant_id, r.action, r.subject, r.issuer, r.key
       FROM (SELECT d.tenant_id, d.action, d.subject, d.issuer, d.key,
                    row_number() OVER (
                        PARTITION BY d.tenant_id, d.action, d.subject, orangerail.issuer_key(d.issuer), d.key
                        ORDER BY (d.expires_at > now() OR d.outcome IS NULL) DESC, d.outcome IS NOT NULL DESC,
                                 d.issuer = orangerail.issuer_key(d.issuer) DESC, d.issuer COLLATE "C") AS rank
             FROM orangerail.idempotency_keys d) r
       WHERE r.rank > 1) dropped
WHERE (k.tenant_id, k.action, k.subject, k.issuer, k.key) = (dropped.tenant_id, dropped.action, dropped.subject, dropped.issuer, dropped.key);
UPDATE orangerail.idempotency_keys SET issuer = orangerail.issuer_key(issuer) WHERE issuer <> orangerail.issuer_key(issuer);
ALTER TABLE orangerail.idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE UNIQUE INDEX idempotency_keys_canonical_idx
    ON orangerail.idempotency_keys (tenant_id, action, subject, orangerail.issuer_key(issuer), key);
GRANT EXECUTE ON FUNCTION orangerail.issuer_key(text) TO orangerail_runtime;

-- +goose Down
-- The keys stay under their canonical issuer: the spelling each was filed
-- under is not kept, and the version before this one claims and finds a
-- key under that form (what its compatibility lookup of the configured
-- spelling misses, a re-spelled config missed before this migration too).
REVOKE EXECUTE ON FUNCTION orangerail.issuer_key(text) FROM orangerail_runtime;
DROP INDEX orangerail.idempotency_keys_canonical_idx;
