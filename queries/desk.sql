-- name: DeskSessionCreate :exec
-- Starts a desk session; id_hash is the SHA-256 of the cookie's id.
INSERT INTO orangerail.desk_sessions (id_hash, tenant_id, subject, issuer, caller, form_token, expires_at)
VALUES (@id_hash, @tenant_id, @subject, @issuer, @caller, @form_token, @expires_at);

-- name: DeskSessionGet :one
-- A live session: neither expired nor revoked.
SELECT * FROM orangerail.desk_sessions
WHERE id_hash = @id_hash AND revoked_at IS NULL AND expires_at > now();

-- name: DeskSessionRevoke :exec
-- Ends one session (signing out).
UPDATE orangerail.desk_sessions SET revoked_at = now() WHERE id_hash = @id_hash AND revoked_at IS NULL;

-- name: DeskSessionRevokeSubject :execrows
-- Ends every live session of one person (an operator's revocation): the
-- count is of sessions that could still be used, not of expired ones.
UPDATE orangerail.desk_sessions SET revoked_at = now()
WHERE issuer = @issuer AND subject = @subject AND revoked_at IS NULL AND expires_at > now();

-- name: DeskSessionPrune :exec
-- Forgets sessions that ended more than a day ago.
DELETE FROM orangerail.desk_sessions
WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day';

