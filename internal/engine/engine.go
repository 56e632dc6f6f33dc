package engine

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// Mode is how the engine treats actions.
type Mode string

// The modes.
const (
	// ModeLive stages, executes and audits actions.
	ModeLive Mode = "live"
	// ModeDryRun records a dry_run audit record where it would stage or
	// execute, and never creates, consumes or executes an approval.
	ModeDryRun Mode = "dry_run"
)

// ModeOf is the mode a preset runs the engine in: sandbox is dry-run.
func ModeOf(p ontology.Preset) Mode {
	if p == ontology.PresetSandbox {
		return ModeDryRun
	}
	return ModeLive
}

// Caller is who calls the engine, as a transport established it.
type Caller struct {
	// Subject identifies the caller; empty for an anonymous caller.
	Subject string
	// Issuer is the OIDC issuer that verified the caller's token; empty for
	// a caller no issuer vouched for (stdio's development identity, the
	// CLI). A subject is unique only within its issuer.
	Issuer string
	Tenant string
	Roles  []string
	Scopes []string
	Kind   ActorKind
	// DevMode marks the local development identity; every audit record it
	// causes says so.
	DevMode bool
}

// Authenticated reports whether the caller proved an identity of a
// tenant. The door refuses a token naming no tenant of the accepted form;
// a caller that reaches the engine without one anyway (a new door, an
// embedding) has no chain to be recorded in nor rows to be served, and is
// served as no one, where each call failed uncoded on its first store.
func (c *Caller) Authenticated() bool {
	return c.Subject != "" && database.ValidateTenantID(c.Tenant) == nil
}

// person reports whether the caller is a verified person: who may review
// and decide approvals and read the audit log, whatever roles an agent's
// token claims.
func (c *Caller) person() bool { return c.Authenticated() && c.Kind == ActorHuman }

// HasRole reports whether the caller holds any of roles.
func (c *Caller) HasRole(roles ...string) bool {
	return slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(c.Roles, r) })
}

// owns reports whether caller staged a: the same subject of the same
// issuer (a subject is unique only within its issuer), however the config
// spelled the issuer when it staged it (ontology.SameIssuer).
func (c *Caller) owns(a *store.Approval) bool {
	act := c.actor()
	return a.RequestedBy == act.Subject && ontology.SameIssuer(a.RequestedIssuer, act.Issuer)
}

// actor is the caller as an audit record names it.
func (c *Caller) actor() Actor {
	return Actor{Subject: cmp.Or(c.Subject, "anonymous"), Kind: cmp.Or(c.Kind, ActorAgent), Issuer: c.Issuer}
}

// Config configures an Engine.
type Config struct {
	// Ontology is the loaded declaration. Required.
	Ontology *ontology.Config
	// Store is the service database, a pool whose connections act as
	// orangerail_runtime (database.Open). Required.
	Store *pgxpool.Pool
	// Datasource holds the team's data. Nil: the Store.
	Datasource *pgxpool.Pool
	// Effects makes each action's effect, by the kind its execute
	// declares; the composition root supplies orangerail's
	// (effects.Factories). Required for every kind the ontology's actions
	// use but not_implemented.
	Effects map[ontology.ExecuteKind]EffectFactory
	// TargetReaders makes the reader of each action whose target an
	// upstream answers (target: {upstream: …}); the composition root
	// supplies orangerail's (effects.TargetReader). Required when an
	// action declares one.
	TargetReaders TargetReaderFactory
	// Catalog is the datasource's tables as its live catalog describes
	// them (ontology.Config.CheckCatalog, or ReadCatalog). Required: a
	// read checks every value an agent sends against its column's type
	// before any SQL runs.
	Catalog *ontology.Catalog
	// Ring holds the keys that sign input digests and list cursors, kept
	// secret and shared by every replica: its active key signs, and every
	// key verifies what it signed. Required, unless Key is set.
	Ring *keyring.Ring
	// Key, when Ring is nil, is a ring of one (keyring.Single): 32 random
	// bytes under the legacy kid.
	Key []byte
	// Mode defaults to ModeLive.
	Mode Mode
	// Logger receives the full text of failures. Defaults to slog.Default().
	Logger *slog.Logger
	// NowFunc returns the current time. Defaults to time.Now.
	NowFunc func() time.Time
	// Hooks receives the engine's events. Nil: none are emitted.
	Hooks *Hooks
	// Tracer makes the spans of the engine's calls and their phases. Nil:
	// none (a no-op tracer).
	Tracer trace.Tracer
}

// KeySize is the size of Config.Key.
const KeySize = keyring.Size

// Engine runs reads and the governed action lifecycle. It is safe for
// concurrent use.
type Engine struct {
	cfg *ontology.Config
	// store and datasource run every transaction under the ontology's
	// limits (lock_timeout, statement_timeout): a wait that lasts past
	// them fails, classified, instead of hanging the call.
	store      *database.Bounded
	datasource *database.Bounded
	catalog    *ontology.Catalog
	sameDB     bool
	// effects holds each action's effect, by name; none for an action
	// declared not_implemented.
	effects map[string]Effect
	// targetReaders holds the reader of each action whose target an
	// upstream answers, by its declaration.
	targetReaders map[*ontology.Action]TargetReader
	// effectTimeout is the deadline of an effect's context.
	effectTimeout time.Duration
	ring          *keyring.Ring
	mode          Mode
	log           *slog.Logger
	now           func() time.Time
	hooks         *Hooks
	tracer        trace.Tracer
	// definitions holds each action's definition hash, by name, computed
	// once: the config does not change while the engine runs.
	definitions map[string][]byte
	// writes holds what each action whose SQL statement's columns are
	// known before it runs would write (writePlan), parsed once.
	writes map[*ontology.Action]writePlan
	// tools holds every tool the ontology declares, by name.
	tools map[string]ontology.Tool
	// readSchemas holds each read tool's compiled input schema, by name:
	// the schema ReadSchemas advertises.
	readSchemas map[string]*ontology.Validator
	// reads holds each object's read statements, by name.
	reads map[string]readSQL
	// keys lines up this process's calls under one idempotency key.
	keys keyLocks
	// opened are the tenants this process has opened (openTenant).
	opened openedTenants
	// owed are the budget slots this process's executions could not give
	// back when they ended (unspend).
	owed owedReleases

	// afterConsume, set only by tests (export_test.go), runs right after an
	// approval is consumed, inside the consuming transaction.
	afterConsume func()
	// beforeFinish, set only by tests, runs after an effect on a separate
	// datasource committed and before its end is recorded.
	beforeFinish func()
	// beforeExecute, set only by tests, runs as an execution begins, with
	// its context.
	beforeExecute func(context.Context)
	// onKeyWait, set only by tests, runs each time a call finds its
	// idempotency key claimed by a call that runs, before it waits.
	onKeyWait func()
	// beforeRead, set only by tests, runs as a get reads.
	beforeRead func()
	// beforeExpire, set only by tests, runs as a poll that read its
	// approval lapsed is about to expire it.
	beforeExpire func()
	// beforeDecide, set only by tests, runs as a person's decision read
	// its approval (decideQuickly) and is about to make it, with what it
	// is about to send.
	beforeDecide func(*store.ApprovalDecideParams)
	// keepLeases, set only by tests, leaves every execution's budget slot
	// held when it ends: a replica that died mid-execution.
	keepLeases bool
}

// New returns an Engine for c.
func New(c Config) (*Engine, error) {
	switch {
	case c.Ontology == nil:
		return nil, errors.New("engine: Config.Ontology is required")
	case c.Store == nil:
		return nil, errors.New("engine: Config.Store is required")
	case c.Catalog == nil:
		return nil, errors.New("engine: Config.Catalog is required")
	case c.Ring == nil && len(c.Key) != KeySize:
		return nil, errors.New("engine: Config.Ring is required, or a Config.Key of 32 bytes")
	}
	ring := c.Ring
	if ring == nil {
		var err error
		if ring, err = keyring.Single(c.Key); err != nil {
			return nil, err
		}
	}
	made, err := effects(c.Ontology.Actions, c.Effects)
	if err != nil {
		return nil, err
	}
	readers, err := targetReaders(c.Ontology.Actions, c.TargetReaders)
	if err != nil {
		return nil, err
	}
	limits := StoreLimits(c.Ontology.Limits)
	e := &Engine{
		cfg:           c.Ontology,
		store:         database.Bound(c.Store, limits),
		catalog:       c.Catalog,
		effects:       made,
		targetReaders: readers,
		effectTimeout: limits.StatementTimeout + effectGrace,
		ring:          ring,
		mode:          cmp.Or(c.Mode, ModeLive),
		log:           cmp.Or(c.Logger, slog.Default()),
		now:           c.NowFunc,
		hooks:         c.Hooks,
		tracer:        tracerOr(c.Tracer),
	}
	// Each webhook message is owed to the endpoints configured when its
	// event happens; an instance that names none queues no message.
	e.store.Webhooks = ontology.WebhookRoutes(c.Ontology.Webhooks)
	if hooks := c.Ontology.Webhooks; ontology.Scoped(hooks) {
		e.store.WebhooksFor = ontology.WebhookRouter(hooks)
	}
	e.datasource, e.sameDB = e.store, true
	if c.Datasource != nil && c.Datasource != c.Store {
		e.datasource, e.sameDB = database.Bound(c.Datasource, limits), false
	}
	e.definitions = make(map[string][]byte, len(c.Ontology.Actions))
	for name, a := range c.Ontology.Actions {
		e.definitions[name] = definitionHash(a)
	}
	e.writes = planWrites(c.Ontology.Actions)
	e.tools = map[string]ontology.Tool{}
	for _, t := range c.Ontology.Tools() {
		e.tools[t.Name] = t
	}
	if e.readSchemas, err = e.compileReadSchemas(); err != nil {
		return nil, err
	}
	e.reads = e.readStatements()
	if e.now == nil {
		e.now = time.Now
	}
	return e, nil
}

// mac returns an HMAC-SHA-256 of parts under the ring's active key, and
// the kid it carries (keyring.Carried).
func (e *Engine) mac(purpose string, parts ...[]byte) ([]byte, keyring.KID) {
	active := e.ring.Active()
	return macUnder(active.Secret(), purpose, parts...), keyring.Carried(active.ID)
}

// macBy returns the HMAC-SHA-256 of parts under the key kid names (the
// empty kid: the legacy key), or false when the ring no longer holds it.
func (e *Engine) macBy(kid keyring.KID, purpose string, parts ...[]byte) ([]byte, bool) {
	secret, ok := e.ring.Lookup(kid)
	if !ok {
		return nil, false
	}
	return macUnder(secret, purpose, parts...), true
}

// macUnder returns an HMAC-SHA-256 of parts under key, with a purpose
// label so that a digest of one kind never verifies as another. The kid
// is not among the parts: it only selects the key, and a digest made
// before rings must stay the same under the legacy key.
func macUnder(key []byte, purpose string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(purpose))
	for _, p := range parts {
		// Length-prefixed, so that no two lists of parts hash alike.
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		h.Write(p)
	}
	return h.Sum(nil)
}

// failure logs an outcome's full error under its correlation id and
// returns the outcome. A call its caller cancelled (a client's
// notifications/cancelled, its connection closed) failed for nothing an
// operator must look at: logged at info, not as an error.
func (e *Engine) failure(ctx context.Context, op string, o *Outcome) *Outcome {
	level, msg := slog.LevelError, "engine failure"
	if errors.Is(ctx.Err(), context.Canceled) && errors.Is(o.Err, context.Canceled) {
		level, msg = slog.LevelInfo, "engine call cancelled by its caller"
	}
	e.log.Log(ctx, level, msg, "op", op, "status", string(o.Status),
		"correlation_id", o.CorrelationID, "diagnostic", string(o.Diagnostic), "error", o.Err)
	return o
}

// Store is the engine's store under the deployment's limits (lock_timeout,
// statement_timeout, and the idle and connection bounds they make): what
// every transaction the server runs on its own database goes through, the
// sealer's, the checkpointer's and the rate counts' too. A sealer on the bare pool that its
// host stopped answering mid-batch would hold its tenant's head, and keep
// every replica from sealing it, until TCP keepalive noticed, hours later.
func (e *Engine) Store() *database.Bounded { return e.store }

// BoundAsStore returns pool bounded as the engine's store is: under its
// limits, and queueing no webhook message where the config names no
// webhook. A command acting with the owner's own connection runs on it.
func (e *Engine) BoundAsStore(pool *pgxpool.Pool) *database.Bounded {
	b := *e.store
	b.Pool = pool
	return &b
}
