// Package errcode defines orangerail's stable refusal codes. Each code is
// declared once, with the cause it names and the fix it suggests;
// `orangerail errors explain CODE` prints them.
package errcode

import (
	"errors"
	"slices"
	"strings"
)

// Code is a stable, documented refusal code such as X_DATABASE_UNREACHABLE.
type Code string

// The codes. Add a code here and describe it in table; a test holds the two
// in step.
const (
	DatabaseURLInvalid   Code = "X_DATABASE_URL_INVALID"
	DatabaseUnreachable  Code = "X_DATABASE_UNREACHABLE"
	DatabaseTimeout      Code = "X_DATABASE_TIMEOUT"
	DatabaseUnmigrated   Code = "X_DATABASE_UNMIGRATED"
	DatabaseTooNew       Code = "X_DATABASE_TOO_NEW"
	RollbackRefused      Code = "X_ROLLBACK_REFUSED"
	DatabaseRoleMissing  Code = "X_DATABASE_ROLE_MISSING"
	TenantInvalid        Code = "X_TENANT_INVALID"
	TenantUnknown        Code = "X_TENANT_UNKNOWN"
	AuditEntryInvalid    Code = "X_AUDIT_ENTRY_INVALID"
	AuditAppendOnly      Code = "X_AUDIT_APPEND_ONLY"
	AuditLagBoundInvalid Code = "X_AUDIT_LAG_BOUND_INVALID"
	AuditChainBroken     Code = "X_AUDIT_CHAIN_BROKEN"
	ApprovalLifecycle    Code = "X_APPROVAL_LIFECYCLE"
	NoDatabaseAvailable  Code = "X_NO_DATABASE"

	ApprovalArgumentsMismatch  Code = "X_APPROVAL_ARGUMENTS_MISMATCH"
	ApprovalDecided            Code = "X_APPROVAL_DECIDED"
	ApprovalFourEyes           Code = "X_APPROVAL_FOUR_EYES"
	ApprovalExpired            Code = "X_APPROVAL_EXPIRED"
	Forbidden                  Code = "X_FORBIDDEN"
	ActionNotServed            Code = "X_ACTION_NOT_SERVED"
	RequestInvalid             Code = "X_REQUEST_INVALID"
	ApprovalsPath              Code = "X_APPROVALS_PATH"
	APIRouteUnknown            Code = "X_API_ROUTE_UNKNOWN"
	RouteUnknown               Code = "X_ROUTE_UNKNOWN"
	ContentEncodingUnsupported Code = "X_CONTENT_ENCODING_UNSUPPORTED"
	RequestTooLarge            Code = "X_REQUEST_TOO_LARGE"
	ApprovalNotFound           Code = "X_APPROVAL_NOT_FOUND"
	BreakGlassRefused          Code = "X_BREAK_GLASS_REFUSED"
	ExecutionNotUnfinished     Code = "X_EXECUTION_NOT_UNFINISHED"
	ExecutionMayBeRunning      Code = "X_EXECUTION_MAY_BE_RUNNING"
	ApprovalInputShredded      Code = "X_APPROVAL_INPUT_SHREDDED"
	ApprovalInputUnreadable    Code = "X_APPROVAL_INPUT_UNREADABLE"

	IdentityRequired       Code = "X_IDENTITY_REQUIRED"
	SecretKeyMissing       Code = "X_SECRET_KEY_MISSING" //nolint:gosec // G101: an error code's name, not a credential
	ConfigInvalid          Code = "X_CONFIG_INVALID"
	ScaffoldTableUnknown   Code = "X_SCAFFOLD_TABLE_UNKNOWN"
	PolicyMissing          Code = "X_POLICY_MISSING"
	MCPIdempotencyShadowed Code = "X_MCP_IDEMPOTENCY_KEY_SHADOWED"
	MCPScopeUnknown        Code = "X_MCP_SCOPE_UNKNOWN"
	MCPScopeConflict       Code = "X_MCP_SCOPE_CONFLICT"
	MCPScopeUncovered      Code = "X_MCP_SCOPE_UNCOVERED"
	// The meta surface's (surface:, groups:, surface measure).
	MCPGroupUnknown      Code = "X_MCP_GROUP_UNKNOWN"
	MCPGroupConflict     Code = "X_MCP_GROUP_CONFLICT"
	MCPSurfaceInvalid    Code = "X_MCP_SURFACE_INVALID"
	MCPToolDuplicate     Code = "X_MCP_TOOL_DUPLICATE"
	MCPSurfaceOverBudget Code = "X_MCP_SURFACE_OVER_BUDGET"
	// End of the meta surface's.
	AuditorInvalid         Code = "X_AUDITOR_INVALID"
	AuditorPasswordInvalid Code = "X_AUDITOR_PASSWORD_INVALID" //nolint:gosec // G101: an error code's name, not a credential
	AuditorGrantNotFound   Code = "X_AUDITOR_GRANT_NOT_FOUND"

	WebhookNotFound     Code = "X_WEBHOOK_NOT_FOUND"
	WebhookInFlight     Code = "X_WEBHOOK_IN_FLIGHT"
	WebhookStateInvalid Code = "X_WEBHOOK_STATE_INVALID"

	MCPBodyTooLarge        Code = "X_MCP_BODY_TOO_LARGE"
	MCPProtocol            Code = "X_MCP_PROTOCOL"
	MCPOriginRefused       Code = "X_MCP_ORIGIN_REFUSED"
	MCPRateLimited         Code = "X_MCP_RATE_LIMITED"
	MCPAuthThrottled       Code = "X_MCP_AUTH_THROTTLED"
	MCPUnauthorized        Code = "X_MCP_UNAUTHORIZED"
	MCPIdentityUnavailable Code = "X_MCP_IDENTITY_UNAVAILABLE"
	StdioTokenRefused      Code = "X_STDIO_TOKEN_REFUSED" //nolint:gosec // G101: an error code's name, not a credential
	IdentityOriginRefused  Code = "X_IDENTITY_ORIGIN_REFUSED"
	IdentityNetworkRefused Code = "X_IDENTITY_NETWORK_REFUSED"
	MCPLimitsUnavailable   Code = "X_MCP_LIMITS_UNAVAILABLE"
	MCPQueryRejected       Code = "X_MCP_QUERY_REJECTED"
	MCPToolUnknown         Code = "X_MCP_TOOL_UNKNOWN"
	MCPPromptUnknown       Code = "X_MCP_PROMPT_UNKNOWN"
	MCPResourceUnknown     Code = "X_MCP_RESOURCE_UNKNOWN"
	MCPScopeDenied         Code = "X_MCP_SCOPE_DENIED"
	MCPQueryTooLarge       Code = "X_MCP_QUERY_TOO_LARGE"
	MCPParseError          Code = "X_MCP_PARSE_ERROR"
	MCPInvalidRequest      Code = "X_MCP_INVALID_REQUEST"
	MCPInvalidParams       Code = "X_MCP_INVALID_PARAMS"
	MCPMethodUnknown       Code = "X_MCP_METHOD_UNKNOWN"
	MCPHostRefused         Code = "X_MCP_HOST_REFUSED"
	MCPHeaderMismatch      Code = "X_MCP_HEADER_MISMATCH"
	InternalError          Code = "X_INTERNAL_ERROR"
	InputInvalid           Code = "X_INPUT_INVALID"
	InputTooLarge          Code = "X_INPUT_TOO_LARGE"
	IdempotencyKeyReused   Code = "X_IDEMPOTENCY_KEY_REUSED"
	RateLimited            Code = "X_RATE_LIMITED"

	DeskSignInFailed   Code = "X_DESK_SIGN_IN_FAILED"
	DeskSignInRequired Code = "X_DESK_SIGN_IN_REQUIRED"
	DeskNotAPerson     Code = "X_DESK_NOT_A_PERSON"
	DeskFormRefused    Code = "X_DESK_FORM_REFUSED"
	DeskStreamsBusy    Code = "X_DESK_STREAMS_BUSY"
	DeskPageUnknown    Code = "X_DESK_PAGE_UNKNOWN"

	// The approvals commands' client of the API (internal/desk/client).
	ServerInsecure      Code = "X_SERVER_INSECURE"
	ServerUnreachable   Code = "X_SERVER_UNREACHABLE"
	ListenFailed        Code = "X_LISTEN_FAILED"
	DrainIncomplete     Code = "X_DRAIN_INCOMPLETE"
	TokenIssuerMismatch Code = "X_TOKEN_ISSUER_MISMATCH" //nolint:gosec // G101: an error code's name, not a credential
	// `orangerail login`.
	IssuerUnreachable Code = "X_ISSUER_UNREACHABLE"
	LoginFailed       Code = "X_LOGIN_FAILED"

	MCPPromptPlaceholderUnknown Code = "X_MCP_PROMPT_PLACEHOLDER_UNKNOWN"
	MCPPromptArgumentDuplicate  Code = "X_MCP_PROMPT_ARGUMENT_DUPLICATE"
	MCPPromptArgumentUnused     Code = "X_MCP_PROMPT_ARGUMENT_UNUSED"
	MCPPromptArgumentsInvalid   Code = "X_MCP_PROMPT_ARGUMENTS_INVALID"

	// The policy compiler's (policy compile, explain, diff).
	PolicySpecUnreadable  Code = "X_POLICY_SPEC_UNREADABLE"
	PolicySpecUnsupported Code = "X_POLICY_SPEC_UNSUPPORTED"
	PolicyServiceInvalid  Code = "X_POLICY_SERVICE_INVALID"
	PolicySelectorInvalid Code = "X_POLICY_SELECTOR_INVALID"
	PolicyAcceptInvalid   Code = "X_POLICY_ACCEPT_INVALID"
	Usage                 Code = "X_USAGE"
	Interrupted           Code = "X_INTERRUPTED"
	FileUnusable          Code = "X_FILE_UNUSABLE"
	PolicyBaseURLMissing  Code = "X_POLICY_BASE_URL_MISSING"
	PolicyActionsTooLarge Code = "X_POLICY_ACTIONS_TOO_LARGE"
	PolicyManifestInvalid Code = "X_POLICY_MANIFEST_INVALID"
	PolicyToolUnknown     Code = "X_POLICY_TOOL_UNKNOWN"
	PolicyDiffWidens      Code = "X_POLICY_DIFF_WIDENS"

	// Signed checkpoints and proofs (internal/checkpoint).
	AuditCheckpointMissing Code = "X_AUDIT_CHECKPOINT_MISSING"
	AuditProofRange        Code = "X_AUDIT_PROOF_RANGE"
	AuditProofMalformed    Code = "X_AUDIT_PROOF_MALFORMED"
	AuditProofInvalid      Code = "X_AUDIT_PROOF_INVALID"
	CheckpointKeyInvalid   Code = "X_CHECKPOINT_KEY_INVALID"

	// The server's key ring (internal/keyring).
	KeyRingEntryInvalid Code = "X_KEY_RING_ENTRY_INVALID"
	KeyRingKeyInvalid   Code = "X_KEY_RING_KEY_INVALID"
	KeyRingDuplicateKID Code = "X_KEY_RING_DUPLICATE_KID"
	KeyRingNoActiveKey  Code = "X_KEY_RING_NO_ACTIVE_KEY"
	KeyRingKIDUnknown   Code = "X_KEY_RING_KID_UNKNOWN"
)

// Entry describes one code, for two audiences: Fix is the operator's (and
// a person's), printed by `orangerail errors explain`; AgentFix is what an
// agent is told (the errors_explain tool), and names only what an agent
// can do. One table holds both, so that a code's two fixes never drift
// apart.
type Entry struct {
	Code  Code
	Cause string
	Fix   string
	// AgentFix is set for every code an agent's call can be answered with
	// (a tool result, a JSON-RPC error, an HTTP refusal of /mcp), and empty
	// for a code only operators and people meet: ForAgent answers those
	// with agentFixOperatorOnly.
	AgentFix string
}

// agentFixOperatorOnly is the fix an agent is told of a code no agent's
// call is answered with: its fix is for an operator or a person.
const agentFixOperatorOnly = "An agent's call is never answered with this code: an operator or a person meets it, and only they can fix it. " +
	"If you were shown it, give the code to the operator (or the person you act for) rather than retrying."

// ForAgent returns the fix an agent is told: AgentFix, or, for a code only
// operators and people meet, to hand the code to the operator.
func (e Entry) ForAgent() string {
	if e.AgentFix == "" {
		return agentFixOperatorOnly
	}
	return e.AgentFix
}

// OperatorOnly reports whether no agent's call is answered with the code.
func (e Entry) OperatorOnly() bool { return e.AgentFix == "" }

var table = []Entry{
	{DatabaseURLInvalid, "The database URL could not be parsed.",
		"Set DATABASE_URL (or --database-url) to a URL such as postgres://user@host:5432/dbname?sslmode=disable.", ""},
	{DatabaseUnreachable, "The database server did not answer, refused the login, or answered with a TLS certificate that did not verify.",
		"Check that Postgres is running and reachable at the host and port of the URL, and that the user may log in; for a certificate, that the URL's host is one the certificate names (sslmode=verify-full) and sslrootcert holds its issuer.", ""},
	{DatabaseTimeout, "A command's transaction ran past its limits: a lock it waited on was held past lock_timeout, a statement ran past statement_timeout, or Postgres did not answer within the transaction's deadline (where a command reads a config, its limits: lock_timeout, statement_timeout twice and 5 seconds). A transaction Postgres ended at its limits did not commit; one it did not answer did not either, unless its COMMIT had been sent.",
		"Run the command again. If it times out again, see what holds the lock or keeps Postgres busy (pg_stat_activity, pg_locks), or whether the network to it drops packets.", ""},
	{DatabaseUnmigrated, "The database has no orangerail schema, or an older one than this binary needs.",
		"Run `orangerail migrate up` against it.", ""},
	{DatabaseTooNew, "The database was migrated by a newer orangerail than this binary.",
		"Run the newer orangerail, or migrate down with it first; this binary refuses to touch a schema it does not know.", ""},
	{RollbackRefused, "A migration's rollback would lose what the database holds, or leave it read wrongly: open approvals, sealed inputs or live idempotency keys the older schema cannot keep. It changed nothing.",
		"Do what the message says of the rows it names (decide the approvals or let them lapse; wait until the keys expire), then roll back again.", ""},
	{DatabaseRoleMissing, "The login cannot assume the orangerail_runtime role (nor, for `audit verify`, `audit checkpoint` and `audit prove`, read as an auditor), or lacks a privilege the command needs.",
		"Migrations, auditor grants, settles and break glass run as the schema owner's login (the one `orangerail migrate` runs with). " +
			"For the server's login: run `orangerail migrate up` as the schema owner, and `GRANT orangerail_runtime TO <login>` if the server logs in as another user. " +
			"For an auditor's login: make it with `orangerail auditor grant <login> --tenant <tenant>`, and never grant it orangerail_runtime, which reads every tenant.", ""},
	{TenantInvalid, "A tenant id is empty or holds characters outside [A-Za-z0-9._-] (first a letter or digit, at most 128).",
		"Use a tenant id of that form; map your identity provider's claim to one.", ""},
	{TenantUnknown, "No tenant of that id exists in this database.",
		"Check the id with `orangerail audit verify` (which lists tenants), or let the tenant's first governed call create it.", ""},
	{AuditEntryInvalid, "An audit record was refused by the database as malformed.",
		"This is a bug in orangerail: report it with the host log line that carries the correlation id.", ""},
	{AuditAppendOnly, "Something tried to change or remove audit history.",
		"Audit rows and chain heads are append-only; nothing may update, delete or truncate them.", ""},
	{AuditLagBoundInvalid, "`audit verify --lag-bound` is zero or negative: every record would be a finding, or none.",
		"Give a positive duration, such as 2m (the default); leave room for the clocks of the replicas that write records.", ""},
	{AuditChainBroken, "A tenant's audit chain does not verify: a record was changed, removed, reordered or forged.",
		"Treat it as an incident: keep a copy of the database, and compare the reported seq with your backups.", ""},
	{AuditCheckpointMissing, "The tenant's audit log has no signed checkpoint yet, or none of the size asked for: checkpoints are signed every audit.checkpoint.interval, by a replica configured with a signing key, once the log has sealed records.",
		"Configure audit.checkpoint.key_file or key_env (`orangerail audit checkpoint-key generate` makes a key) and wait one interval; `orangerail audit checkpoint --tenant T` shows the latest, and proofs name the sizes of checkpoints that exist.", ""},
	{AuditProofRange, "A proof was asked for outside the tree: a seq below 1 or beyond the checkpoint's size, --from larger than --to, or a size no checkpoint was signed at.",
		"Ask for a seq from 1 to the checkpoint's size, and for sizes of checkpoints that exist (`orangerail audit checkpoint --tenant T` shows the latest), the older first.", ""},
	{AuditProofMalformed, "A proof file or checkpoint is not of the documented form (orangerail-proof/v1 JSON carrying C2SP signed notes); the problem is named.",
		"Pass the file `orangerail audit prove` (or /api/v1/audit/proof/...) wrote, unchanged.", ""},
	{AuditProofInvalid, "A proof does not verify: its checkpoint is not signed by any of the given keys, its signature or record was changed, or the log it came from was rewritten after the checkpoint was signed.",
		"Check that --key names the checkpoint key's public key (old keys too after a rotation); if it does, treat it as an incident: the log does not match the checkpoint you hold.", ""},
	{CheckpointKeyInvalid, "A checkpoint key is not usable: the signing key (audit.checkpoint.key_file or key_env) is missing or not a signed-note Ed25519 signer key (PRIVATE+KEY+name+hash+data), or a public key given to check-proof is not <name>+<hash>+<keydata>.",
		"Make a key pair with `orangerail audit checkpoint-key generate --name NAME --out FILE`; give the server the private key and verifiers the public key.", ""},
	{ApprovalLifecycle, "An approval change broke its lifecycle (staged calls never change; status moves forward only).",
		"This is a bug in orangerail or a manual edit: report it.", ""},
	{ApprovalArgumentsMismatch, "The digest the approver approved is not the digest of the approval's input: the approver saw other arguments.",
		"Show the approval again (`orangerail approvals show ID`), review the input it prints, and approve with the digest printed there.", ""},
	{ApprovalDecided, "The approval was decided already (approved, rejected or executed); an approval is decided once.",
		"Show it (`orangerail approvals show ID`) to see its status; the agent stages the call anew if it is still wanted.", ""},
	{ApprovalFourEyes, "The approver is the caller who requested the approval, and four_eyes is on.",
		"Have another person with the approver role decide it.", ""},
	{ApprovalExpired, "The approval lapsed (approvals.ttl) before anyone decided it; a lapsed approval is never decided.",
		"Nothing will execute; the agent stages the call anew if it is still wanted, and a person decides that one in time.", ""},
	{Forbidden, "The caller may not do this. For a person: the approvals API serves people only (not agent tokens), deciding or reviewing an action's approvals needs one of its approver roles (policy.approver_roles, default approvals.approver_role), and reading the audit log needs the auditor role (approvals.auditor_role) or an approver role. For an agent's tool call: the action's policy refused it — its where precondition does not hold for the target as it is now, or, when an approval executes, the poller is no longer among the action's callers (policy.roles, policy.audience).",
		"A person: sign in as one whose token carries one of those roles; an operator grants roles at the identity provider. An agent: do not retry as is; read the action's description for when it applies, or ask the account's owner for the role.",
		"Do not retry as is: the action's policy refused the call. Call describe_action for when the action applies (its precondition) and who may call it; if you need it anyway, ask the account's owner for the role."},
	{ActionNotServed, "An approved approval names an action this deployment does not serve: the action's environments do not include the config's environment, which changed after the approval was staged. It does not execute here; the refusal is recorded, and the approval stays approved (it lapses at its expiry).",
		"Serve the action in this environment (its environments), or have the agent stage the call again where the action is served.",
		"Do not poll again here: the action is not served in this deployment. Ask the account's owner whether the call should be made elsewhere."},
	{ApprovalsPath, "An approvals command names neither how to reach the approvals nor both: the deployment's API as the person signed in (--server), or, in an emergency, the database as its owner (--break-glass with a --reason).",
		"Pass --server with the deployment's http.public_url (or set ORANGERAIL_SERVER) and sign in with `orangerail login` (or set ORANGERAIL_TOKEN); only when the API cannot be reached, --break-glass --reason TEXT with the database owner's --database-url.", ""},
	{RequestTooLarge, "The request's body is larger than the approvals API or the desk accepts (a decision: a verdict, a digest and a note).",
		"Send the decision alone (to the API, {\"decision\", \"digest\", \"note\"}), the note at most 4096 bytes.", ""},
	{APIRouteUnknown, "The approvals API has no such path, or the path takes another method (the answer's Allow header names it).",
		"Call a path with the method the API's OpenAPI document gives it: GET /api/v1/openapi.json.", ""},
	{ContentEncodingUnsupported, "The request's body is sent with a Content-Encoding (gzip, deflate, br, …) the server does not decode: every body it reads (MCP's messages, the approvals API's, the desk's forms) is read as sent, unencoded.",
		"Send the body without a Content-Encoding header (or with identity); bodies are small, bounded by http.max_body_bytes.",
		"Send the request's body unencoded, without a Content-Encoding header; nothing ran."},
	{RouteUnknown, "The server serves no such path, or the path takes another method (the answer's Allow header names it); a path is served as written, never cleaned (no \"//\", \".\" or \"..\" in it).",
		"Call a path the server serves, with its method: /mcp (MCP), /api/v1/… (the approvals API, its OpenAPI document at /api/v1/openapi.json), /approvals (the desk, where one is configured), /healthz, /readyz, and the OAuth metadata under /.well-known/.",
		"Send MCP requests to the server's MCP endpoint (its path /mcp) exactly as configured, with POST; nothing ran."},
	{RequestInvalid, "The request to the approvals API or the desk is malformed: a query parameter, a form's field or the JSON body is not of the documented form (each problem is named).",
		"Fix what the message names, and send it again (the approvals API's OpenAPI document is at /api/v1/openapi.json).", ""},
	{ApprovalNotFound, "No approval of that id exists in the tenant; to an agent's poll, none that is the agent's own (an approval is its requester's: the same subject, signed in at the same issuer).",
		"Check the id with `orangerail approvals list` (through the API, the tenant is your token's; with --break-glass, the --tenant given).",
		"Poll with the approvalId your call was answered with (not its correlationId), as the identity that made the call: an approval staged by another agent, or under a token of another issuer, answers this, as one that does not exist. Nothing ran; to act, make the call again."},
	{ApprovalInputShredded, "The approval's sealed input was crypto-shredded (approvals.retention passed after the approval ended): nobody can read it again, and the approval, already decided, cannot be decided.",
		"Nothing to decide: the audit log keeps the approval's records and its input's digest. To act again, the agent makes a new call.", ""},
	{ApprovalInputUnreadable, "The approval's sealed input does not open here: the key ring no longer holds (or, during a key rotation, does not yet hold) the key that sealed it (its kid is the approval's input_key_id), or the row was altered. It is not executed, and nobody may approve it here, since nobody here can be shown it; it may be rejected.",
		"Put the dropped key back in ORANGERAIL_SECRET_KEY (inactive) until the approval has ended; drop keys only as the README's key rotation says.", ""},
	{BreakGlassRefused, "An operator's record — a break-glass decision, an execution settled, an auditor granted or revoked — needs a connection logged in as the owner of the orangerail schema (or a superuser) acting as itself, and a decision or a settle a reason; this one gave no reason, or is a runtime login or SET ROLE to another role.",
		"Decide through the desk or `orangerail approvals approve --server URL` when it is up; otherwise, and to settle an execution, pass --reason TEXT and the owner's database URL (the one `orangerail migrate` runs with), not the runtime's; grant or revoke an auditor with the owner's URL.", ""},
	{ExecutionMayBeRunning, "The execution started too recently to settle: it may still be running (its effect waiting on an upstream, its end about to be recorded), and an end it records would stand beside the settle.",
		"Wait until the time the message names has passed since it started — the deployment's statement_timeout twice, its lock_timeout and a few seconds — then settle it if it is still unfinished.", ""},
	{ExecutionNotUnfinished, "No execution of that correlation id is unfinished in the tenant: none started under it, or it finished (succeeded, failed, or settled already).",
		"Run `orangerail audit verify --tenant T` and settle one of the unfinished executions it lists, by the correlation id it prints.", ""},
	{IdentityRequired, "Serving MCP over HTTP needs a verified identity for every caller, and none is configured.",
		"Configure identity.oidc in the config, or serve a local developer over stdio with `orangerail serve --stdio`.", ""},
	{SecretKeyMissing, "The server's secret key (which signs input digests and list cursors) is missing or malformed.",
		"Set ORANGERAIL_SECRET_KEY to 64 hex characters (`openssl rand -hex 32`), the same on every replica.", ""},
	{KeyRingEntryInvalid, "An entry of the key ring in ORANGERAIL_SECRET_KEY is not kid:key, or its kid is not 1 to 32 of [a-z0-9_-] starting with a letter or digit.",
		"Write the ring as kid:key entries separated by commas, the active key first (`orangerail keys list` reads it back; `orangerail keys rotate` writes one).", ""},
	{KeyRingKeyInvalid, "A key of the key ring in ORANGERAIL_SECRET_KEY is not 64 hex characters (32 bytes).",
		"Give every key as 64 hex characters (`openssl rand -hex 32`), or let `orangerail keys rotate` make one.", ""},
	{KeyRingDuplicateKID, "The key ring in ORANGERAIL_SECRET_KEY names one kid twice: what carries that kid could not say which key made it.",
		"Keep one entry per kid; give a new key a new kid (`orangerail keys rotate` does).", ""},
	{KeyRingNoActiveKey, "The key ring has no active key: ORANGERAIL_SECRET_KEY is empty or its first entry (the active key) is, or a command would drop the active key.",
		"Put the key that signs new digests and cursors first; activate another key (`orangerail keys activate KID`) before dropping the active one.", ""},
	{KeyRingKIDUnknown, "A keys command names a kid the ring in ORANGERAIL_SECRET_KEY does not hold.",
		"`orangerail keys list` lists the ring's kids; name one of them.", ""},
	{ConfigInvalid, "The ontology config has problems; each is listed with its field path.",
		"Fix each problem; `orangerail config check FILE` lists them all.", ""},
	{ScaffoldTableUnknown, "orangerail init was asked (--tables) for a table the datasource does not have: an ordinary table outside the system schemas and orangerail's own, named as table in public, else schema.table.",
		"Correct the name as the catalog spells it (case included; `\\dt *.*` in psql lists them), or leave --tables out to scaffold every table.", ""},
	{PolicyMissing, "An action in the config names no roles, no scope and no approval (actions.NAME.policy), so it would be open to every authenticated caller; deny by default refuses to load it.",
		"Give the action a policy: roles that may call it (policy: {roles: [support]}), a scope (policy: {scope: \"orders:write\"}), or a person's approval of every call (policy: {approval: required}).", ""},
	{MCPIdempotencyShadowed, "An idempotent action's input declares a property named idempotencyKey (actions.NAME.input.properties.idempotencyKey); that argument is reserved for the idempotency key a retry sends, so the action's own input would be shadowed.",
		"Rename the input property, or drop idempotent: true from the action.", ""},
	{MCPScopeUnknown, "The config's scopes map lists a tool name no tool has (scopes.SCOPE.N): no object, action or built-in tool of this config makes it.",
		"Correct the name to one `orangerail config check FILE` accepts (objects make NAME_get and NAME_list, actions their own name, plus the built-in check_approval, describe_object, describe_action, list_policies and errors_explain and, when enabled, sql_query), or remove it.", ""},
	{MCPScopeConflict, "A tool is listed under two scopes of the config's scopes map, or under a scope other than the one its action's policy.scope names: a tool is granted by exactly one scope, so the map and the policy cannot disagree about which.",
		"List the tool under one scope only; for an action with policy.scope, that scope (or drop policy.scope and let the map say it).", ""},
	{MCPScopeUncovered, "The config has a scopes map, and a tool is under none of its scopes: given at all, the map must grant every tool, so that no tool answers a token by being forgotten.",
		"List the tool under the scope a token must carry to call it; `orangerail config check FILE` names each tool left out.", ""},
	// The meta surface's.
	{MCPGroupUnknown, "The config's groups: names a tool the config does not make (or a meta tool, which no group holds).",
		"Name one of the config's tools in the group; `orangerail config check FILE` lists them.", ""},
	{MCPGroupConflict, "The config's groups: lists one tool in two groups: a tool is reached through one resource of the meta surface.",
		"Keep the tool in one group.", ""},
	{MCPSurfaceInvalid, "surface: and groups: disagree: a caller may be served the meta surface but no groups are declared, or groups are declared and nobody is served meta.",
		"Declare groups for the meta surface, or set surface: {default: meta} (or a surface.audiences rule with surface: meta); or remove what is not used.", ""},
	{MCPToolDuplicate, "An action takes the name of a meta tool (list_resources, describe_resource, manage_resource), which the meta surface declares when anyone is served it.",
		"Rename the action.", ""},
	{MCPSurfaceOverBudget, "`orangerail surface measure` estimated an audience's tools/list above surface.budget.max_tokens.",
		"Serve that audience the meta surface (surface.audiences), group more tools, shorten descriptions, or raise the budget knowingly.", ""},
	// End of the meta surface's.
	{MCPToolUnknown, "No tool of that name is offered to this caller: none exists, or the caller is outside its audience (its roles or audience predicate); the two answer alike, so that probing names reveals nothing.",
		"Call tools/list for the tools this caller may use. If a tool should be there, an operator checks the caller's roles against the tool's declaration.",
		"Call tools/list for the tools you may use, and do not guess names. If a tool you need is missing, ask the operator to grant your identity the role it needs."},
	{MCPResourceUnknown, "No resource of that URI is offered to this caller: none exists, or the caller may not read it (an object it may not read, an approval it did not request); the two answer alike, so that probing URIs reveals nothing.",
		"Call resources/list and resources/templates/list for the resources this caller may read. If one should be there, an operator checks the caller's roles.",
		"Call resources/list and resources/templates/list for the resources you may read, and do not guess URIs; an approval's resource is readable by the agent that requested it only."},
	{MCPPromptUnknown, "prompts/get named no prompt offered to this caller: none exists, or the caller is outside its audience; the two answer alike, so that probing names reveals nothing.",
		"Name a prompt prompts/list shows, spelled exactly.",
		"Name a prompt prompts/list shows you, spelled exactly."},
	{MCPScopeDenied, "The tool is offered to this caller, but the connection's token does not carry the scope that grants it (the config's scopes map, or the action's policy.scope); the scope is checked before the input is read.",
		"Request a token with the scope named in the error (an OAuth client asks for it in its scope parameter; `orangerail login` passes identity.oidc.scopes) and reconnect with it.",
		"Request a token with the scope named in the error and reconnect with it; until then, use the tools your token's scopes grant."},
	{IdempotencyKeyReused, "The idempotencyKey was sent before with a different input to the same action; a key names one call, and answers its retries with that call's result.",
		"Send a new idempotencyKey for a different call, or repeat the first call's input exactly to get its result.",
		"Send a new idempotencyKey for a different call, or repeat the first call's input exactly to get its result."},
	{WebhookNotFound, "No webhook message of that id exists in the tenant.",
		"Check the id and the tenant with `orangerail webhooks list --tenant T`.", ""},
	{WebhookInFlight, "The webhook message is being sent now: a worker holds its lease, and a redelivery then would let a second worker send it at the same time.",
		"Wait for the attempt to end, then redeliver it again: the worker releases the message once each endpoint has been sent it, after the earlier messages of its batch (each endpoint's sends bounded by the worker's timeout); a worker that died holds it until its lease lapses, minutes later.", ""},
	{PolicySpecUnreadable, "policy compile could not read the API description: the file is missing or unreadable, larger than 64 MiB, or neither JSON, YAML nor XML.",
		"Point policy compile at an OpenAPI 2.0, 3.0 or 3.1 document (JSON or YAML) or a WSDL 1.1 document, readable by the user running it.", ""},
	{PolicySpecUnsupported, "The file reads, but is not a description policy compile takes: not OpenAPI 2.0, 3.0 or 3.1 (its openapi or swagger member says another version, or is missing), or not a WSDL 1.1 definitions document.",
		"Convert the description to OpenAPI 3.1 or 3.0 (or give the WSDL 1.1 document the service publishes), then compile it again.", ""},
	{PolicyServiceInvalid, "--service names both the compiled deployment and its upstream, and the credential variables <SERVICE>_<SCHEME>_CREDENTIAL: it must be lower-case letters, digits and '-', beginning with a letter, at most 63.",
		"Pass --service with a name such as payments or carrier-labels.", ""},
	{PolicySelectorInvalid, "--actions writes only the operations an --include picks, and an --include was missing, could not be read, or picked no operation of the description (a typo would otherwise serve less than meant, silently).",
		"Pass --include tag:NAME, operation:ID, method:METHOD (soap for SOAP operations) or * for all, once or comma-separated; policy compile without --actions lists every operation's tool name.", ""},
	{Usage, "The command line is not one the command takes: a command or flag it does not know, a required flag missing, a flag's value of the wrong kind, or too many or too few arguments.",
		"Run the command with --help, and pass what it lists.", ""},
	{Interrupted, "The command was stopped by SIGINT or SIGTERM before it finished: what it reads or computes (a verify, a compile) was cut short and reports nothing (but `audit check-proof`, which says the files it checked before the signal), and a file it had not yet written was not written.",
		"Run the command again and let it finish; a second signal ends a command that does not stop at the first.", ""},
	{FileUnusable, "A file the command line names, or the sign-in token `orangerail login` keeps, could not be used: one to read is missing, unreadable, a directory, or (the kept token) readable by others or not a token orangerail wrote; one to write (--out) exists already, which is never overwritten, or its directory is missing or not writable.",
		"Check the path the message names; for --out, name a new file or move the old one aside; for the kept token, remove it and run `orangerail login` again.", ""},
	{PolicyAcceptInvalid, "--accept is TOOL=REASON, naming a tool of this description and a reason a reviewer can read; it was missing its reason, named a tool twice, or named no tool of the description.",
		"Pass --accept createLabel='the carrier key is scoped to labels by the carrier' for each tool whose fatal finding a person accepts; policy explain TOOL shows the finding first.", ""},
	{PolicyBaseURLMissing, "The actions file needs the upstream's URL, and neither --base-url nor the description names one orangerail may call: https, or http on loopback, with no variables.",
		"Pass --base-url with the API's root, such as https://api.example.com/v1.", ""},
	{PolicyActionsTooLarge, "The actions the --include picks would make a file larger than config check reads (8 MiB, or 500,000 YAML nodes): each action holds its own copy of every schema its input reaches, so one large schema shared by many operations multiplies. Nothing was written.",
		"Pick fewer operations with --include (by tag or operation), and compile the rest into another file.", ""},
	{PolicyManifestInvalid, "The file is not a policy manifest this orangerail reads: not JSON, another format version, or values its JSON Schema refuses (a manifest edited by hand so that its values contradict each other).",
		"Compile the manifest again with policy compile rather than editing it; change a policy by reviewing it and accepting findings with --accept.", ""},
	{PolicyToolUnknown, "policy explain names a tool the manifest does not hold.",
		"Name one of the manifest's tools: they are listed under tools[].name, one per operation.", ""},
	{PolicyDiffWidens, "policy diff found a change that grants or risks more: a scope or scheme added, an operation turned destructive, approval dropped, retries loosened, a sensitive field no longer masked, or an operation newly served.",
		"Review each change marked ! before serving the new description; the exit status is 1 so that a release pipeline stops here until someone has.", ""},
	{WebhookStateInvalid, "There is no webhook delivery state of that name.",
		"Name one of queued, delivered or failed, or leave --status out to list every state.", ""},
	{MCPBodyTooLarge, "The request body (over stdio, the message's line) is larger than the server accepts (http.max_body_bytes, default 1 MiB).",
		"Send a smaller request: one JSON-RPC message, with arguments of reasonable size.",
		"Send a smaller request: one JSON-RPC message, with arguments of reasonable size."},
	{MCPProtocol, "The request is not one JSON-RPC message: batches are not accepted, whatever the protocol version.",
		"Send each JSON-RPC request in its own HTTP request.",
		"Send each JSON-RPC request in its own HTTP request, never a batch."},
	{MCPParseError, "The message is not JSON: over HTTP the request's body, over stdio its line, does not parse as one JSON value.",
		"Send exactly one JSON-RPC 2.0 message as JSON: over HTTP as a POST body with Content-Type application/json, over stdio on one line ending in a newline.",
		"Send exactly one JSON-RPC 2.0 message as JSON: over HTTP as a POST body with Content-Type application/json, over stdio on one line ending in a newline."},
	{MCPInvalidRequest, "The message is JSON but not a JSON-RPC 2.0 message the server takes (\"jsonrpc\" must be \"2.0\", \"method\" a string, \"id\" a string or an integer of at most 2^53 in magnitude that a request has (never null) and a notification has not, and a method's required \"params\" present), or the HTTP request is not one MCP's Streamable HTTP takes (a POST with Content-Type application/json, an Accept naming application/json and text/event-stream, a supported MCP-Protocol-Version, and from protocol 2026-07-28 a protocol version in params._meta the server serves, listed in the error's data.supported), or, over stdio, a request out of the session's order (any before the initialize handshake, a second initialize) or a call under the id of one still running; the message says which.",
		"Fix the message or the request as the error's message says; an MCP SDK's client sends well-formed requests.",
		"Fix the message or the request as the error's message says; an MCP SDK's client sends well-formed requests."},
	{MCPInvalidParams, "A request's \"params\" do not have the shape its method takes in the MCP specification: a member of the wrong JSON type (params.name must be a string, params.arguments of prompts/get an object of strings, params.cursor a string, params._meta an object, …), params that are not an object, or a value the method does not take (a list's params.cursor the server never gave, a logging level MCP does not name), or, from protocol 2026-07-28, a params._meta without the protocol version (io.modelcontextprotocol/protocolVersion) or client capabilities (io.modelcontextprotocol/clientCapabilities) every request of that version carries, or with a clientInfo that is no implementation; the message names the member by its path or its _meta key.",
		"Send the member the message names as the MCP specification types it, a cursor only as a list's nextCursor gave it; an MCP SDK's client sends well-formed params.",
		"Send the member the message names as the MCP specification types it (for tools/call: params.name a string, params.arguments an object), then call again; nothing ran."},
	{MCPMethodUnknown, "The server serves no JSON-RPC method of that name: none of the MCP specification has it, or it belongs to a capability the server does not declare (completions; resource subscriptions over stateless HTTP; prompts when the config declares none), or, to a request of protocol 2026-07-28, it is one that version no longer has (initialize, ping, logging/setLevel, resources/subscribe), or it is that version's server/discover, to a request of an earlier one.",
		"Call a method of the MCP specification (initialize, tools/list, tools/call, …), spelled exactly; the capabilities of the initialize answer (from protocol 2026-07-28, of server/discover's) say which the server offers.",
		"Call a method of the MCP specification (initialize, tools/list, tools/call, …), spelled exactly; the capabilities of the initialize answer (from protocol 2026-07-28, of server/discover's) say which the server offers."},
	{MCPHeaderMismatch, "Over HTTP, a request of MCP protocol 2026-07-28 or later whose headers disagree with its body: the Mcp-Method header missing or naming another method than the body's, the Mcp-Name header missing or naming another tool, prompt or resource than params.name or params.uri, an Mcp-Param-* header unlike the argument it carries, or the MCP-Protocol-Version header missing or naming another version than params._meta's io.modelcontextprotocol/protocolVersion; the message says which.",
		"Send each header as the body says it: Mcp-Method the method, Mcp-Name the tool, prompt or resource named, each Mcp-Param-* its argument, MCP-Protocol-Version the version in params._meta; an MCP SDK's client of that version sends them.",
		"Send each header as the body says it: Mcp-Method the method, Mcp-Name the tool, prompt or resource named, each Mcp-Param-* its argument, MCP-Protocol-Version the version in params._meta; nothing ran."},
	{MCPHostRefused, "The request reached the server over a loopback connection, but its Host header names no loopback host (localhost, 127.0.0.0/8, [::1]): what a browser tricked by DNS rebinding sends.",
		"Call the server by a loopback name (http://localhost:PORT, http://127.0.0.1:PORT); a reverse proxy on the same machine passes a loopback Host, or the server listens off loopback with http.public_url set.",
		"Call the server by a loopback name (http://localhost:PORT or http://127.0.0.1:PORT), as a local client does."},
	{MCPOriginRefused, "The request came from a browser origin the server does not allow: one not in http.allowed_origins and, when http.listen is a loopback address, not a loopback origin either (DNS-rebinding and cross-site protection).",
		"Call from a non-browser client, or have the operator add the origin to http.allowed_origins.",
		"Call from a client that is not a browser page; a browser origin calls only if the operator allows it."},
	{IdentityOriginRefused, "The request carries an Origin header, so a browser sent it, and identity.refuse_browser_origins refuses browser-origin calls even with a valid token.",
		"Call from a non-browser client (one that sends no Origin header), or have the operator unset identity.refuse_browser_origins.",
		"Call from a client that sends no Origin header (not a browser page)."},
	{IdentityNetworkRefused, "The request came from an address outside every network in identity.allowed_networks, so its token, though valid, is refused.",
		"Call from an allowed network, or have the operator add yours to identity.allowed_networks (behind proxies, check http.trusted_proxy_hops).",
		"Call from a network this deployment accepts; ask the operator which."},
	{MCPRateLimited, "The caller has made more calls of this class (reads, or writes) this minute than allowed.",
		"Wait for the number of seconds in Retry-After, then retry.",
		"Wait for the number of seconds in Retry-After, then retry; spread your calls out instead of retrying at once."},
	{RateLimited, "The action's call budget in this tenant is spent: it has executed as many times this minute (calls_per_minute) or today (daily_call_budget) as allowed, or is executing as many times at once (max_concurrent). Budgets default from the action's risk class (read, write, destructive) and are shared by every replica; nothing ran, and an approved approval stays approved.",
		"Wait retry_after_seconds, then call again (or poll the approval again); to change the budget, set actions.NAME.budget: {per_minute, max_concurrent, per_day} in the config.",
		"Wait the retry_after_seconds the answer gives, then call again, or poll check_approval again with the same approvalId: the approval stays approved. The limit is shared with every other caller of this action in your tenant."},
	{MCPAuthThrottled, "Too many requests from this address (an IPv6 address: its /64) this minute carried an invalid token, or none (the two are counted apart; a valid token is never throttled by them).",
		"Send a valid token (the 401 challenge names where to get one); a request without one, or with a refused one, may follow after the number of seconds in Retry-After.",
		"Stop sending requests without a valid token: get a fresh token from the issuer, then retry after the number of seconds in Retry-After."},
	{MCPUnauthorized, "The request carries no valid bearer token.",
		"Send an access token from the issuer named in the protected-resource metadata, in `Authorization: Bearer …`.",
		"Send a valid access token in `Authorization: Bearer …`, from the issuer the protected-resource metadata names; get a fresh one if yours expired."},
	{MCPIdentityUnavailable, "The server could not verify the token: the OIDC issuer's discovery document or signing keys could not be fetched.",
		"Retry shortly; an operator checks that the issuer in identity.oidc.issuer is reachable from the server (/readyz reports it).",
		"Retry after a pause: the server could not reach its identity provider, which is not your token's fault."},
	{StdioTokenRefused, "`orangerail serve --stdio --token-env VAR` was given no token in $VAR, or a token the issuer in identity.oidc does not vouch for (a bad signature, another issuer or audience, expired, no tenant), or the session's token has expired since it started.",
		"Put a fresh access token from the issuer in identity.oidc.issuer in the variable (`orangerail login` gets one) and start the server again; or leave --token-env out to serve under the development identity.",
		"The session's token expired or was refused, so every request fails until the server restarts: ask the person who started it to restart it with a fresh token."},
	{MCPLimitsUnavailable, "The rate-limit counters could not be read, and the server is set to refuse calls then (on_store_error: closed).",
		"Retry shortly; an operator checks the database the counters live in.",
		"Retry after a pause; the call did not run."},
	{AuditorInvalid, "The auditor name is not a plain lower-case identifier, or names a role that is not a plain orangerail auditor: one that cannot log in, holds a power (superuser, bypassing RLS, creating roles or databases, replication), is a member of a role besides orangerail_auditor (orangerail_runtime, the schema's owner), or is named by an object of some database (owns it, is granted it).",
		"Choose a new name of [a-z_][a-z0-9_]*; orangerail never turns an existing role into an auditor, nor changes the password of one it did not make.", ""},
	{AuditorGrantNotFound, "The login has no grant of the tenant in this database: nothing was revoked. The message lists the tenants it may read.",
		"Check the login's name and the tenant id (a typo?), and the database the URL names.", ""},
	{AuditorPasswordInvalid, "The auditor's password is empty (the --password-env variable unset or blank), or holds a character Postgres and its clients change before hashing a password (SASLprep): a non-ASCII space such as the no-break space, an invisible character such as the soft hyphen, or a letter not in Unicode NFKC form (fullwidth, decomposed or compatibility letters). orangerail sends Postgres only the password's SCRAM verifier, which would not match the password a client logs in with.",
		"Set the variable --password-env names to the password; choose one without such characters (printable ASCII always works), or write it in NFKC form with plain spaces.", ""},
	{MCPQueryRejected, "The read-only SQL tool refused the statement; the rule it broke is named (one_statement, select_only, no_into, no_locking, no_modifying, banned_function, relation_not_allowed, no_parameters, no_unicode_escape, syntax, too_long; and, from the live catalog, volatile_function: a call, operator or cast that may resolve to a VOLATILE function, or unresolved_function: one that resolves to none, or to an extension's or one outside pg_catalog and the tool's schemas).",
		"Send exactly one plain SELECT (CTEs, joins and window functions are fine) without locking clauses, INTO, data-modifying CTEs, $n parameters, U& escapes or calls into the banned function families (x.f and (x).f call f), reading only relations in the tool's schemas (no pg_* catalogs, no information_schema), and calling only functions and operators that exist in pg_catalog or those schemas, belong to no extension, and are not VOLATILE (random(), gen_random_uuid() and clock_timestamp() excepted).",
		"Rewrite the statement as the named rule says: one plain SELECT (CTEs, joins and window functions are fine) reading only the tool's schemas, without locking clauses, INTO, data-modifying CTEs, U& escapes or volatile and banned functions."},
	{MCPQueryTooLarge, "One message of the read-only SQL tool's answer from the database — a row, or an error quoting a long value — exceeded the connection's 1 MiB limit, though long values are cut in the database; the query was ended unread.",
		"Select fewer or narrower columns, cut long values yourself (left(col, n)), and avoid errors that quote long values (casting a long string to a number).",
		"Select fewer or narrower columns, cut long values yourself (left(col, n)), and avoid errors that quote long values (casting a long string to a number)."},
	{InternalError, "An unexpected internal error (a bug) interrupted the request; its details are withheld from the answer.",
		"Retry; if it persists, an operator finds the error and its stack in the host log under the correlationId the answer carries, and reports the bug.",
		"Retry once; if it fails again, stop and give the operator the correlationId the answer carries."},
	{InputInvalid, "A tool's arguments do not satisfy its input schema or the read's rules; each issue is listed at its JSON pointer path.",
		"Fix each issue at its path and call the tool again; tools/list shows every tool's input schema.",
		"Correct each argument at the path its issue names and call the tool again; describe_action (or tools/list) shows the input schema."},
	{InputTooLarge, "An action's input is larger than the server accepts (limits.max_input_bytes, default 64 KiB, counted as sent).",
		"Send a smaller input; an operator can raise limits.max_input_bytes in the config.",
		"Send a smaller input: shorten the longest values. If a legitimate input needs more, ask the operator to raise the limit."},
	{NoDatabaseAvailable, "No Postgres was found: DATABASE_URL is unset, nothing answers on 127.0.0.1:5432, and no local Postgres binaries were found.",
		"Install PostgreSQL (e.g. `apt-get install postgresql`), start Docker and run `docker compose up -d postgres`, or set DATABASE_URL.", ""},
	{DeskSignInFailed, "The sign-in at the approvers' desk did not complete: the issuer refused it, the sign-in page was left too long or opened in another browser, or the tokens it returned did not verify.",
		"Start again from /approvals; if it keeps failing, check the desk's client_id and secret at the issuer and that its redirect URI is <public_url>/approvals/callback.", ""},
	{DeskSignInRequired, "The desk page needs a signed-in person: there is no session, or it expired or was revoked.",
		"Sign in again at /approvals.", ""},
	{DeskNotAPerson, "The token the issuer returned is not a person's (identity.oidc.human) or names no tenant: only people decide approvals.",
		"Sign in with a person's account; ask the identity provider's administrator to set the claim identity.oidc.human reads.", ""},
	{DeskFormRefused, "The desk refused a form: it came from another site, or without this session's form token (cross-site request forgery protection).",
		"Reload the page and submit the form again from the desk itself.", ""},
	{DeskStreamsBusy, "A session holds as many live lists open on this server as it may (each re-reads the database every poll): the desk's other tabs or windows of this sign-in keep theirs.",
		"Close the desk's tabs you do not need, then reload this one; its list is still current when loaded, only no longer updates itself.", ""},
	{DeskPageUnknown, "The desk has no such page, or the page takes another method: an address typed or kept from elsewhere, or a form sent where none is taken.",
		"Open the desk's list, /approvals, and follow its links.", ""},
	{ListenFailed, "The server could not listen on an address the config names (http.listen, metrics.listen): another process holds it, the host is not this machine's, or the port needs privileges.",
		"Free the address or name another (http.listen, metrics.listen; for the demo, `make run LISTEN=127.0.0.1:8081`).", ""},
	{DrainIncomplete, "serve was told to stop and calls were still in flight when its drain ended (the execution bound and a grace: each execution records its end within the bound); the process was stopped with them unanswered, and an execution among them may be left outcome_unknown.",
		"Look for execution_started records with no end (orangerail audit verify lists them) and settle them once you know how they ended (orangerail audit settle); a call should never outlast the drain, so a drain that ends early points at a handler that hangs.", ""},
	{ServerUnreachable, "The orangerail server --server names did not answer, or answered as no orangerail API does: an error page of a proxy or another service, or a body that is not the API's JSON.",
		"Check --server (the deployment's http.public_url) and that the server runs; an answer of 5xx or 429 passes, so try again shortly.", ""},
	{ServerInsecure, "An approvals command would send the person's bearer token where others could read or take it: --server is plain http off loopback, or the server answered with a redirect (the API never redirects; a redirect could lead the token elsewhere, or from https to http). Or `orangerail login` was given an issuer of plain http off loopback, where the sign-in and its token would cross the network in clear (no server takes such an issuer).",
		"Use the deployment's https address (its http.public_url), and its issuer's https URL for login. Only for a development server on a network you trust, pass --plain-http to the approvals commands.", ""},
	{TokenIssuerMismatch, "The bearer token an approvals command would send comes from another issuer than the one the server takes (its protected-resource metadata's authorization_servers at /.well-known/oauth-protected-resource/api/v1), or the server names none: it is not sent. The issuer is the one `orangerail login` kept the token from, else the token's own iss claim.",
		"Sign in at the deployment's issuer: `orangerail login --issuer URL` (or --config with its config), or set ORANGERAIL_TOKEN to a token of that issuer.", ""},
	{IssuerUnreachable, "`orangerail login` could not read the OIDC issuer's discovery document (ISSUER/.well-known/openid-configuration): the issuer did not answer, answered with an error, or its document names another issuer. Nothing was signed in, and a token kept before is kept.",
		"Check --issuer: it is identity.oidc.issuer exactly as the server's config names it (or pass --config with that config), and it answers from here. The demo's development issuer listens on a port of its own each run: take it from the demo's output.", ""},
	{LoginFailed, "`orangerail login` reached the issuer, but the sign-in did not happen: the issuer offers no device authorization grant, refused the command line's client (--client-id), or the person denied the code or let it expire. Nothing was signed in, and a token kept before is kept.",
		"Sign in again and approve the code at the issuer in time; if the issuer refused the client, register a public client allowed the device grant there and pass its id with --client-id; an issuer without the device grant needs a token got another way, in ORANGERAIL_TOKEN.", ""},
	{MCPPromptPlaceholderUnknown, "A prompt's message (prompts.NAME.message) holds a placeholder {{name}} that names none of the prompt's arguments, or braces that are not a placeholder: nobody could fill it, and the model would read it as written.",
		"Declare the argument under prompts.NAME.arguments, correct the placeholder's name, or take the braces out; a placeholder is {{name}}, a name being a letter or _ then letters, digits or _.", ""},
	{MCPPromptArgumentDuplicate, "A prompt declares two arguments of one name (prompts.NAME.arguments.N.name): a client could not tell which value goes where.",
		"Name each of the prompt's arguments once.", ""},
	{MCPPromptArgumentUnused, "A prompt declares an argument its message never uses (no {{name}} in prompts.NAME.message): a person would be asked for a value that is then dropped.",
		"Use the argument in the message as {{name}}, or remove it from prompts.NAME.arguments.", ""},
	{MCPPromptArgumentsInvalid, "prompts/get was sent arguments the prompt does not take: a required argument is missing or empty, an argument is not one the prompt declares, or a value is longer than the server accepts.",
		"Send each required argument, by the names prompts/list shows for the prompt, and only those it declares.",
		"Send each required argument, by the names prompts/list shows for the prompt, and only those it declares."},
}

// Explain returns the entry for a code, matched case-insensitively.
func Explain(code string) (Entry, bool) {
	i := slices.IndexFunc(table, func(e Entry) bool { return strings.EqualFold(string(e.Code), code) })
	if i < 0 {
		return Entry{}, false
	}
	return table[i], true
}

// All returns every entry, in declaration order.
func All() []Entry { return slices.Clone(table) }

// Error is a refusal carrying a code. Its message is meant for the person
// running orangerail; Err keeps the underlying cause for errors.Is and
// errors.As.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// New returns an *Error with a message and an optional cause.
func New(code Code, msg string, cause error) *Error {
	return &Error{Code: code, Msg: msg, Err: cause}
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// Fix returns the documented fix for the error's code.
func (e *Error) Fix() string {
	entry, _ := Explain(string(e.Code))
	return entry.Fix
}

// Of returns the code of the first *Error in err's chain, or "".
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
