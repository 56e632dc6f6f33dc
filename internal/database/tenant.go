package database

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// ValidateTenantID returns an X_TENANT_INVALID error unless id is a
// well-formed tenant id.
func ValidateTenantID(id string) error {
	if !store.TenantIDPattern.MatchString(id) {
		return errcode.New(errcode.TenantInvalid, "the tenant id is not of the accepted form", nil)
	}
	return nil
}

// Limits bound how long one transaction's statements may wait. Without
// them a statement blocked behind another transaction's row lock waits as
// long as that transaction lasts: a call that hangs instead of failing.
type Limits struct {
	// LockTimeout bounds each wait for a lock (Postgres's lock_timeout);
	// a wait past it fails with SQLSTATE 55P03. Zero: the server's setting.
	LockTimeout time.Duration
	// StatementTimeout bounds each statement (statement_timeout); a
	// statement past it is cancelled with SQLSTATE 57014. Zero: the
	// server's setting.
	StatementTimeout time.Duration
}

// txGrace is what a bounded transaction's deadline allows beyond its
// limits: the round trips of its short statements.
const txGrace = 5 * time.Second

// Deadline bounds one transaction under l on the client's side: a server
// that stops answering (a partition, a hung host) leaves a statement
// waiting on a socket that neither answers nor closes, where no limit the
// server keeps reaches it. A healthy transaction's statements each end
// within the limits, and it waits on a lock, and runs a long statement
// and an effect beside it, at most once each, so it ends well within a
// lock wait, two statements' time and the grace. Zero: no deadline.
func (l Limits) Deadline() time.Duration {
	if l.StatementTimeout <= 0 {
		return 0
	}
	return l.LockTimeout + 2*l.StatementTimeout + txGrace
}

// Bounded is a pool whose transactions run under Limits: InTenant and
// QueryInTenant set them, locally, at the start of every transaction they
// begin on it, so they end with the transaction and never outlive it on a
// pooled connection. InTenant also bounds the transaction on the client's
// side (Limits.Deadline): a connection whose server stops answering fails
// the call instead of hanging it. It is safe for concurrent use, as the pool is.
type Bounded struct {
	*pgxpool.Pool
	Limits Limits
	// Webhooks is what its transactions set orangerail.webhooks to, which
	// the approvals' triggers read when they queue a webhook message: the
	// endpoints each event is owed to (ontology.WebhookRoutes; migrations/00048),
	// or "off" where the config names none (00044), which queues nothing:
	// a message no endpoint takes would wait in the outbox for good. ""
	// sets nothing, and a message is then owed to whichever endpoints are
	// configured where it is delivered.
	Webhooks string
	// WebhooksFor, when set, is what a tenant's transactions set
	// orangerail.webhooks to instead of Webhooks (ontology.WebhookRoutesFor):
	// where an endpoint is scoped to some tenants, the others' events are
	// never owed to it.
	WebhooksFor func(tenant string) string
}

// Bound returns pool, its transactions bounded by limits.
func Bound(pool *pgxpool.Pool, limits Limits) *Bounded {
	return &Bounded{Pool: pool, Limits: limits}
}

// poolScope is what a pool's transactions are scoped with besides their
// tenant.
type poolScope struct {
	limits Limits
	// role is the role they act as: the runtime role on a pool Open made,
	// none otherwise.
	role        string
	webhooks    string
	webhooksFor func(tenant string) string
}

// scopeOf returns what conn's transactions are scoped with.
func scopeOf(conn any) poolScope {
	var s poolScope
	if b, ok := conn.(*Bounded); ok {
		s.limits, s.webhooks, s.webhooksFor, conn = b.Limits, b.Webhooks, b.WebhooksFor, b.Pool
	}
	if p, ok := conn.(*pgxpool.Pool); ok && isRuntime(p) {
		s.role = RuntimeRole
	}
	return s
}

// settings are the transaction-local settings that open a tenant's
// transaction under s: the role when one is set, the tenant, the limits
// set, and the webhook endpoints its events are owed to.
func settings(tenant string, s poolScope) [][2]string {
	var set [][2]string
	if s.role != "" {
		set = append(set, [2]string{"role", s.role})
	}
	if tenant != "" {
		set = append(set, [2]string{store.TenantSetting, tenant})
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"lock_timeout", s.limits.LockTimeout}, {"statement_timeout", s.limits.StatementTimeout}} {
		if t.d > 0 {
			set = append(set, [2]string{t.name, strconv.FormatInt(Milliseconds(t.d), 10)})
		}
	}
	routes := s.webhooks
	if s.webhooksFor != nil {
		// "" for a pipelined statement's scope, which sets them from
		// the tenant it is given (pipelineScope).
		routes = ""
		if tenant != "" {
			routes = s.webhooksFor(tenant)
		}
	}
	if routes != "" {
		set = append(set, [2]string{"orangerail.webhooks", routes})
	}
	return set
}

// scope returns the statement that opens a tenant's transaction with set,
// its settings: it sets the role (on a pool Open made), scopes the
// transaction to tenant and sets the limits, locally, in one statement,
// so they cost no round trip of their own. set_config(…, true) is SET LOCAL
// with its value as a parameter. Its text does not depend on the tenant,
// so a connection prepares it once.
func scope(set [][2]string) (string, []any) {
	var sql strings.Builder
	var args []any
	for i, s := range set {
		if i > 0 {
			sql.WriteString(", ")
		}
		args = append(args, s[1])
		sql.WriteString("set_config('" + s[0] + "', $" + strconv.Itoa(len(args)) + ", true)")
	}
	return "SELECT " + sql.String(), args
}

// beginScoped returns what begins a tenant's transaction under opts and
// scopes it, as one simple-protocol query of two statements: BEGIN, and
// set, its settings, with their values as literals. One round trip instead
// of two, on every transaction InTenant begins. The values are safe as
// literals: a tenant id is of store.TenantIDPattern (no quote, no backslash), a
// limit is digits, and the webhooks' routes are event names and hex keys
// in JSON (or "off"); quotes are doubled all the same.
func beginScoped(opts pgx.TxOptions, set [][2]string) string {
	var sql strings.Builder
	sql.WriteString("begin")
	if opts.IsoLevel != "" {
		sql.WriteString(" isolation level " + string(opts.IsoLevel))
	}
	if opts.AccessMode != "" {
		sql.WriteString(" " + string(opts.AccessMode))
	}
	if opts.DeferrableMode != "" {
		sql.WriteString(" " + string(opts.DeferrableMode))
	}
	if len(set) == 0 {
		return sql.String()
	}
	sql.WriteString("; SELECT ")
	setLiterals(&sql, set)
	return sql.String()
}

// setLiterals writes set, settings, as set_config(…, true) calls (SET
// LOCAL) separated by commas, each value an SQL string literal with its
// quotes doubled.
func setLiterals(sql *strings.Builder, set [][2]string) {
	for i, s := range set {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("set_config('" + s[0] + "', '" + strings.ReplaceAll(s[1], "'", "''") + "', true)")
	}
}

// Milliseconds is d as Postgres counts a timeout: whole milliseconds,
// rounded up, so that a positive duration never becomes 0, which would
// mean no limit at all.
func Milliseconds(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// TxBeginner begins transactions: a *pgxpool.Pool, a *Bounded, a *pgxpool.Conn or a *pgx.Conn.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// InTenant runs fn in a transaction scoped to tenant, and commits when fn
// returns nil. It rolls back when fn fails or panics. On a *Bounded pool
// the transaction runs under its Limits. After the commit it runs what
// AfterCommit registered on fn's transaction.
func InTenant(ctx context.Context, conn TxBeginner, tenant string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	if err := ValidateTenantID(tenant); err != nil {
		return err
	}
	return run(ctx, conn, tenant, opts, true, fn)
}

// Rescope scopes tx, which InTenant began, to another tenant for the
// statements after it, until the next Rescope or the transaction's end:
// for the schema owner's one change that each tenant it touches records
// in its own chain, atomically with the change (an auditor login's
// password, which is the cluster's). The runtime never needs it: each of
// its transactions is one tenant's.
func Rescope(ctx context.Context, tx pgx.Tx, tenant string) error {
	if err := ValidateTenantID(tenant); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "SELECT set_config('orangerail.tenant_id', $1, true)", tenant)
	return err
}

// InTenantWithoutFlush is InTenant for a transaction that commits without
// waiting for its WAL to reach disk (synchronous_commit off, for this
// transaction only, set with its BEGIN at no round trip of its own). Its
// writes are visible to others as soon as it commits, and its locks are
// released then, not after a flush: a transaction that locks a row many
// callers update together (a counter) then holds it for microseconds
// instead of an fsync.
//
// A crash of Postgres can forget such a transaction for a moment after it
// committed — until the WAL writer flushes it, or any later transaction
// that commits normally does: WAL is flushed in order, so every
// transaction committed before a durable commit is durable with it. Use it
// only for writes whose loss is safe to forget that way, and that an
// effect's durable records follow when they matter.
func InTenantWithoutFlush(ctx context.Context, conn TxBeginner, tenant string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	if err := ValidateTenantID(tenant); err != nil {
		return err
	}
	return run(ctx, conn, tenant, opts, false, fn)
}

// Tenantless is InTenant for the statements of no one tenant (which
// tenants have work, a desk session, a rate counter): a transaction under
// the pool's limits that acts as the runtime role on a pool Open made —
// never on whatever role a pooler's server connection was left with.
func Tenantless(ctx context.Context, conn TxBeginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return run(ctx, conn, "", opts, true, fn)
}

// run is InTenant's transaction, of tenant or, when it is "", of none;
// flush says whether its commit waits for its WAL to reach disk.
func run(ctx context.Context, conn TxBeginner, tenant string, opts pgx.TxOptions, flush bool, fn func(pgx.Tx) error) error {
	again := retrier{conn: conn}
	for {
		a := inTenant(ctx, conn, tenant, opts, flush, fn)
		if failed := (*commitFailed)(nil); errors.As(a.err, &failed) {
			// Asked once the transaction's connection is back in the
			// pool: a pool of one would otherwise wait for itself.
			return confirm(ctx, conn, failed)
		}
		if !again.after(ctx, a.err, a.entered, a.repeatable) {
			return a.err
		}
	}
}

// retrier is the rule by which InTenant and QueryInTenant try a
// transaction again after its connection died. A pooled connection whose
// backend died while it sat idle (a terminated backend, a restart, a
// failover) fails at BEGIN, before anything reached the database, and the
// pool discards it: the transaction is begun again, on another
// connection. Its siblings may have died with it, so up to the pool's
// size; each such failure is immediate. A transaction that may be
// repeated (Repeatable) and whose connection died under it after BEGIN
// runs once more, the same way: a backend terminated mid-read is not its
// caller's failure.
type retrier struct {
	conn     any // what the transactions begin on
	begun    int // transactions begun again after a death at BEGIN
	repeated bool
}

// after reports whether to try again after a transaction failed with err,
// having started (run past BEGIN) or not, and whether it may be repeated.
func (r *retrier) after(ctx context.Context, err error, started, repeatable bool) bool {
	pool, pooled := r.conn.(interface{ Stat() *pgxpool.Stat })
	switch {
	case !pooled || !deadOnArrival(ctx, err):
		return false
	case !started:
		r.begun++
		return r.begun <= int(pool.Stat().MaxConns())
	case !repeatable || r.repeated:
		return false
	}
	r.repeated, r.begun = true, 0
	return true
}

// ErrNotCommitted wraps the error of a COMMIT that failed (its connection
// died, or its answer never came) when Postgres confirms that the
// transaction did not commit: nothing of it took effect. See ConfirmCommit.
var ErrNotCommitted = errors.New("the transaction did not commit")

// ConfirmCommit asks InTenant to confirm tx's COMMIT should it fail, for a
// transaction whose caller must not report "may have happened" when
// Postgres knows: it reads the transaction's id now (one round trip, after
// which tx has an id). If the COMMIT then fails, InTenant asks Postgres,
// on another connection, whether the transaction committed
// (pg_xact_status), and if the id did commit, whether w, in the same
// transaction, sees tx's writes: if both, InTenant runs what AfterCommit
// registered and returns nil, as after any commit; if the transaction did
// not commit, or the committed transaction under its id is not tx (w sees
// nothing of it), InTenant returns the COMMIT's error wrapped in
// ErrNotCommitted; when Postgres cannot tell — its backend still holds the
// transaction open past the wait (the limits' statement timeout, or until
// the transaction's idle bound has ended it, whichever is later; else
// commitStatusWait), or no connection answers, or the server that answers
// is not the one the transaction ran on (a standby promoted by a
// failover, a restart: an id it never gave, or gave again to another
// transaction, says nothing of this one), or w fails — the COMMIT's error
// as it was. w must not be nil. Given a transaction InTenant did not
// begin, it does nothing.
func ConfirmCommit(ctx context.Context, tx pgx.Tx, w Witness) error {
	c, ok := tx.(*committing)
	if !ok {
		return nil
	}
	c.witness = mustWitness(w)
	return tx.QueryRow(ctx, currentXID).Scan(&c.origin.xid, &c.origin.server)
}

// Witness reports, in a read-only transaction of the confirmed
// transaction's tenant, whether that transaction's writes are there: a row
// only it wrote, which nothing removes or changes so as to hide it (an
// append-only record). It tells the transaction's own commit from
// another's under the same id: a server that crashed before a COMMIT's
// record reached its disk recovers without the transaction — the same
// run, its postmaster never stopped — and may give its id again, and
// pg_xact_status then answers for that other transaction. The read runs in
// a READ COMMITTED transaction whose snapshot sees the commit: it must not
// take one of its own (a transaction of another isolation); and a witness
// of a transaction of no tenant (Tenantless) sees only rows no tenant's
// row-level security hides.
type Witness func(ctx context.Context, tx pgx.Tx) (bool, error)

// mustWitness returns w, which must not be nil: a commit confirmed by its
// id alone could be another transaction's.
func mustWitness(w Witness) Witness {
	if w == nil {
		panic("database: ConfirmCommit needs a witness of the transaction's writes")
	}
	return w
}

// currentXID reads the transaction's id, giving it one if it has none, and
// its server's (origin).
const currentXID = "SELECT pg_current_xact_id()::text, " + serverStart

// serverStart identifies a server's run: when its postmaster started, as
// seconds since the epoch (text that no session setting changes). A
// standby promoted in a failover, or a server started again, has another.
const serverStart = "extract(epoch FROM pg_postmaster_start_time())::text"

// origin is a transaction's id and the run of the server it ran on, as
// currentXID reads them: an id names a transaction only on that run.
type origin struct{ xid, server string }

// commitStatusWait bounds how long InTenant asks whether a failed COMMIT
// took effect, on a connection without limits.
const commitStatusWait = 5 * time.Second

// idleSettle is how long confirm allows Postgres past a transaction's
// idle bound to end it.
const idleSettle = time.Second

// commitFailed is a COMMIT that failed in a transaction whose id
// ConfirmCommit read: what confirm needs to ask about it.
type commitFailed struct {
	err    error
	origin origin
	// tenant is the transaction's, in whose scope witness reads.
	tenant  string
	witness Witness
	// sent is when the COMMIT was sent.
	sent  time.Time
	after []func()
}

func (c *commitFailed) Error() string { return c.err.Error() }
func (c *commitFailed) Unwrap() error { return c.err }

// confirm asks Postgres whether the transaction of a failed COMMIT
// committed, and answers as ConfirmCommit says.
func confirm(ctx context.Context, conn TxBeginner, failed *commitFailed) error {
	limits := scopeOf(conn).limits
	wait := limits.StatementTimeout
	if wait <= 0 {
		wait = commitStatusWait
	}
	if d := limits.Deadline(); d > 0 {
		// A COMMIT that never reached the server leaves its transaction
		// idle there since before it was sent, until the idle bound
		// (idleBound) ends it: by then, and a moment for the server's
		// timer, Postgres can say. The client gave up at its own
		// deadline, which began earlier, so this is at most the
		// transaction's running time more.
		wait = max(wait, time.Until(failed.sent.Add(d))+idleSettle)
	}
	// The caller's context may be what ended the COMMIT; the question is
	// asked anyway, within its own bound.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	for {
		// An answer of "in progress" is asked again until the wait is
		// over; a failure to ask is not (beyond InTenant's own rule for
		// a pooled connection found dead at BEGIN): a server that went
		// away (a crash, a failover) may take longer than the wait to
		// come back, and the caller learns at once that it cannot be
		// told. (One that came back having forgotten the transaction,
		// and gave its id to another, is told apart by the witness:
		// errAnothers.)
		switch status, err := commitStatus(cctx, conn, failed.tenant, failed.origin, failed.witness); {
		case errors.Is(err, errAnothers):
			return fmt.Errorf("%w: %w (%w)", ErrNotCommitted, failed.err, err)
		case err != nil:
			return failed.err
		case status == "committed":
			for _, f := range failed.after {
				f()
			}
			return nil
		case status == "aborted":
			return fmt.Errorf("%w: %w", ErrNotCommitted, failed.err)
		}
		// In progress: the backend has not yet seen its connection end
		// (it aborts the transaction when it does, or when idle past
		// its bound: idleBound).
		select {
		case <-cctx.Done():
			return failed.err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// errNoVerdict is commitStatus's answer when a server answered and
// cannot say whether the transaction committed.
var errNoVerdict = errors.New("the server cannot say whether the transaction committed")

// errAnothers is commitStatus's answer when the transaction that committed
// under the id is not the one asked about: its witness sees nothing of
// it, so the server gave the id again (Witness), and the one asked about
// did not commit.
var errAnothers = errors.New("the transaction that committed under its id is another: its writes are not there")

// commitStatus reads pg_xact_status of the transaction o: committed,
// aborted or in progress; and, for a committed one, w in the same
// transaction, scoped to tenant, after it — so on the same server, and in
// a later snapshot than the status's, which sees the commit (the status's
// own snapshot is asked whether it does: Postgres marks a commit in its
// log before it takes the transaction off its running list, and a
// committed id not yet visible reads as in progress). It fails with
// errAnothers when w does not see the transaction's writes; with
// errNoVerdict when the server that answers is not o's (its status is
// read only on o's), when Postgres no longer knows the transaction, or
// refuses the question (an id it never gave: 22023); with another error
// when no server answered, or w failed.
func commitStatus(ctx context.Context, conn TxBeginner, tenant string, o origin, w Witness) (status string, err error) {
	// Read committed whatever the server's default: each statement, the
	// witness's too, takes a snapshot of its own.
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly}
	err = run(ctx, conn, tenant, opts, true, func(tx pgx.Tx) error {
		var known *string
		var server string
		var visible bool
		err := tx.QueryRow(ctx, "SELECT CASE WHEN "+serverStart+" = $2 THEN pg_xact_status($1::xid8) END, "+serverStart+
			", pg_visible_in_snapshot($1::xid8, pg_current_snapshot())", o.xid, o.server).
			Scan(&known, &server, &visible)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && !deadOnArrival(ctx, err):
			return fmt.Errorf("%w: %w", errNoVerdict, err)
		case err != nil:
			return err
		case server != o.server:
			return fmt.Errorf("%w: another server answers (started at %s, the transaction's at %s)", errNoVerdict, server, o.server)
		case known == nil:
			return fmt.Errorf("%w: its status is no longer known", errNoVerdict)
		}
		status = *known
		switch {
		case status != "committed":
			return nil
		case !visible:
			status = "in progress" // committed, and still leaving the running list
			return nil
		}
		switch seen, err := w(ctx, tx); {
		case err != nil:
			return fmt.Errorf("read the witness of the transaction's writes: %w", err)
		case !seen:
			return errAnothers
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return status, nil
}

// deadOnArrival reports whether err is a connection found dead as it was
// used, or that died under a statement: its backend is gone (SQLSTATE
// class 08, 57P01–57P03) or it closed without a word. Not a wait that
// timed out, nor a connect that failed: trying again would only wait or
// fail again.
func deadOnArrival(ctx context.Context, err error) bool {
	if err == nil {
		// Before the targets errors.As is given, which escape: a
		// success, every call, allocates none of them.
		return false
	}
	var connect *pgconn.ConnectError
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case ctx.Err() != nil || pgconn.Timeout(err) || errors.As(err, &connect) ||
		(errors.As(err, &netErr) && netErr.Timeout()):
		return false
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == pgerrcode.AdminShutdown ||
			pgErr.Code == pgerrcode.CrashShutdown || pgErr.Code == pgerrcode.CannotConnectNow
	}
	interpreted := store.InterpretError(err)
	return errors.Is(interpreted, store.ErrUnavailable) && !errors.Is(interpreted, store.ErrTimeout)
}

// tried is how one attempt of InTenant ended.
type tried struct {
	err error
	// entered: fn ran. repeatable: it marked its transaction Repeatable.
	entered, repeatable bool
}

// withoutFlush is the setting by which a transaction's commit does not
// wait for its WAL to reach disk: InTenantWithoutFlush's and
// RowWriterWithoutFlush's.
var withoutFlush = [2]string{"synchronous_commit", "off"}

// idleBound is the setting by which Postgres ends a bounded transaction
// left idle longer than its client-side deadline: the server's half of
// that deadline. A client cut off from Postgres by a partition, or whose
// host died, closes its side at the deadline, but the backend may never
// hear of it — nothing arrives, and the server's TCP keepalive waits
// hours — and would hold the transaction's row locks (an approval, a
// budget's count, a tenant's target) against every replica until then.
// A healthy transaction is never idle that long: its client would have
// ended it first. So the backend, idle past it, ends its session and the
// transaction rolls back; a COMMIT that never arrived is then settled as
// not committed for whoever asks (pg_xact_status).
func idleBound(l Limits) [2]string {
	return [2]string{"idle_in_transaction_session_timeout", strconv.FormatInt(Milliseconds(l.Deadline()), 10)}
}

// inTenant is one attempt of InTenant.
func inTenant(ctx context.Context, conn TxBeginner, tenant string, opts pgx.TxOptions, flush bool, fn func(pgx.Tx) error) tried {
	sc := scopeOf(conn)
	limits := sc.limits
	set := settings(tenant, sc)
	if !flush {
		set = append(set, withoutFlush)
	}
	var (
		idleLimit time.Duration
		deadline  time.Time
	)
	if b, ok := conn.(*Bounded); ok && limits.Deadline() > 0 {
		set, idleLimit = append(set, idleBound(limits)), limits.Deadline()
		// The transaction's connection is held here, not by the
		// transaction, so that its deadline is lifted before another
		// caller can take it from the pool.
		pc, until, release, err := acquireBounded(ctx, b, limits)
		if err != nil {
			return tried{err: err}
		}
		defer release()
		conn, deadline = pc, until
	}
	// The scope is sent with BEGIN, unless the caller begins its own way.
	scoped := opts.BeginQuery == ""
	if scoped {
		opts.BeginQuery = beginScoped(opts, set)
	}
	tx, err := conn.BeginTx(ctx, opts)
	if err != nil {
		return tried{err: err}
	}
	// After Commit, Rollback is a no-op; on an error or a panic it ends the
	// transaction.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if !scoped && len(set) > 0 {
		scopeSQL, scopeArgs := scope(set)
		if _, err := tx.Exec(ctx, scopeSQL, scopeArgs...); err != nil {
			return tried{err: err}
		}
	}
	c := &committing{Tx: tx, idleLimit: idleLimit, deadline: deadline}
	if err := fn(c); err != nil {
		return tried{err: err, entered: true, repeatable: c.repeatable}
	}
	sent := time.Now()
	if err := tx.Commit(ctx); err != nil {
		if c.origin.xid != "" {
			err = &commitFailed{err: err, origin: c.origin, tenant: tenant, witness: c.witness, sent: sent, after: c.after}
		}
		return tried{err: err, entered: true, repeatable: c.repeatable}
	}
	for _, f := range c.after {
		f()
	}
	return tried{entered: true}
}

// committing is the transaction InTenant hands its fn: it keeps what
// AfterCommit registers until the commit.
type committing struct {
	pgx.Tx
	after []func()
	// origin is the transaction's id and server once ConfirmCommit
	// read them, and witness its Witness.
	origin  origin
	witness Witness
	// idleLimit is a bounded transaction's idle bound (idleBound), and
	// deadline its connection's (acquireBounded).
	idleLimit time.Duration
	deadline  time.Time
	// repeatable: fn may run again (Repeatable).
	repeatable bool
}

// Repeatable tells InTenant that fn, which tx was handed to, may run again
// whether or not tx committed: should tx's connection die under it (its
// backend terminated, Postgres restarted or failed over: SQLSTATE class
// 08, 57P01–57P03) after BEGIN, its COMMIT included, InTenant runs fn once
// more, in a new transaction on another connection, instead of failing.
// For a transaction that only reads, or whose writes make a state rather
// than add to one (expire what lapsed, seal what is unsealed, raise a
// count to a value), so that running it twice is running it once. fn must
// keep nothing of a first run in Go that a second would not replace (it
// assigns its results, it does not add to them). What AfterCommit
// registered in a run whose COMMIT failed never runs, even if that COMMIT
// took effect (a metric's event of it is lost). fn is run again on any
// dead connection's error it returns, so it must return such an error
// only of tx's own connection. Given any other transaction, Repeatable
// does nothing.
func Repeatable(tx pgx.Tx) {
	if c, ok := tx.(*committing); ok {
		c.repeatable = true
	}
}

// IdleLimit returns how long Postgres lets tx sit idle, when InTenant
// began it on a bounded pool: it ends the transaction, and its locks, once
// it has been idle that long after its last statement (idleBound). So a
// transaction that must hold its locks while its caller waits on
// something else (an effect beside it) holds them only while that fits.
// false: tx has no limit.
func IdleLimit(tx pgx.Tx) (time.Duration, bool) {
	c, ok := tx.(*committing)
	if !ok || c.idleLimit == 0 {
		return 0, false
	}
	return c.idleLimit, true
}

// Deadline returns the earliest time tx, a transaction InTenant began on
// a bounded pool, may end: its connection's deadline, set as it was taken
// from the pool. A statement or COMMIT not answered by then fails, the
// connection is closed, and Postgres rolls the transaction back, its locks
// with it; Postgres also ends it once it has sat idle for IdleLimit after
// its last statement, which is never earlier. So what a transaction's
// caller does while it holds its locks, and must finish while they are
// held, must end before it. false: tx has no bound.
func Deadline(tx pgx.Tx) (time.Time, bool) {
	c, ok := tx.(*committing)
	if !ok || c.deadline.IsZero() {
		return time.Time{}, false
	}
	return c.deadline, true
}

// AfterCommit runs f once tx, the transaction InTenant handed its fn, has
// committed, and never if it rolls back: for what must happen only if the
// transaction's writes did. Given any other transaction, which InTenant
// does not commit, f runs at once.
func AfterCommit(tx pgx.Tx, f func()) {
	if c, ok := tx.(*committing); ok {
		c.after = append(c.after, f)
		return
	}
	f()
}

// pipelineScopes are the statements that open a pipelined statement's
// transaction (pipelineScope), by the pool's scope and the kind they set: as
// many as the process has kinds of pool and statement, a handful. A
// statement looks its scope up without a lock or an allocation; the rare
// new one is added to a copy.
var pipelineScopes struct {
	mu sync.Mutex
	m  atomic.Pointer[map[scopeKey]string]
}

// scopeKey is what a pipelined statement's scope says besides the tenant.
// A pool whose webhook routes depend on the tenant sets them from a
// parameter ($2), so the key says only that it does.
type scopeKey struct {
	limits          Limits
	role, webhooks  string
	tenantsWebhooks bool
	kind            pipelined
}

// pipelined is the kind of transaction a statement sent with its scope in
// one round trip runs in.
type pipelined uint8

const (
	// readOnly: QueryInTenant's and RowReader's, as BEGIN READ ONLY.
	readOnly pipelined = iota
	// writeWithoutFlush: RowWriterWithoutFlush's, a write whose commit
	// does not wait for its WAL to reach disk, as InTenantWithoutFlush's.
	writeWithoutFlush
	// write: RowWriter's, a write committed as InTenant's are.
	write
)

// pipelineScope returns the statement that opens a pipelined statement's
// transaction of kind under sc, its pool's scope: a read's it makes
// read-only, as BEGIN READ ONLY would, a write without flush's it lets
// commit without a flush, as InTenantWithoutFlush's; then it sets the
// pool's settings (settings) and the tenant (its one parameter, $1), each
// locally, as InTenant's scope does. The pool's settings are literals (a
// role's name of Open, digits, off), so the text is the same for every
// statement of a kind on a pool and a connection prepares it once.
func pipelineScope(sc poolScope, kind pipelined) string {
	key := scopeKey{sc.limits, sc.role, sc.webhooks, sc.webhooksFor != nil, kind}
	if m := pipelineScopes.m.Load(); m != nil {
		if sql, ok := (*m)[key]; ok {
			return sql
		}
	}
	pipelineScopes.mu.Lock()
	defer pipelineScopes.mu.Unlock()
	m := map[scopeKey]string{}
	if old := pipelineScopes.m.Load(); old != nil {
		maps.Copy(m, *old)
	}
	if sql, ok := m[key]; ok {
		return sql
	}
	var set [][2]string
	switch kind {
	case readOnly:
		set = append(set, [2]string{"transaction_read_only", "on"})
	case writeWithoutFlush:
		set = append(set, withoutFlush)
	}
	set = append(set, settings("", sc)...)
	var sql strings.Builder
	sql.WriteString("SELECT ")
	setLiterals(&sql, set)
	if len(set) > 0 {
		sql.WriteString(", ")
	}
	sql.WriteString("set_config('orangerail.tenant_id', $1, true)")
	if sc.webhooksFor != nil {
		sql.WriteString(", set_config('orangerail.webhooks', $2, true)")
	}
	m[key] = sql.String()
	pipelineScopes.m.Store(&m)
	return m[key]
}

// Acquirer lends pooled connections: a *pgxpool.Pool or a *Bounded.
type Acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// QueryInTenant runs one read-only query scoped to tenant, in a transaction
// of its own, with the whole transaction sent in one round trip. rows sees
// the query's rows. It is InTenant for the common case of a single read;
// on a *Bounded pool the read runs under its Limits, set in the same round
// trip.
//
// The transaction is the pipeline's own: Postgres runs the statements a
// client sends before one Sync (or in one simple-protocol query, pgx's
// simple_protocol mode) as one implicit transaction, and pgx sends a
// batch so, in every mode. Its first statement makes it read-only and
// scopes it (pipelineScope); the query runs only if that succeeded, since
// Postgres skips the rest of a pipeline after an error; the Sync ends the
// transaction, committed or rolled back, and the settings with it. So it
// is BEGIN READ ONLY, the scope, the query and COMMIT at half the
// statements, and a failed read leaves its connection outside any
// transaction, ready for the pool.
//
// The read is repeatable, as a transaction marked Repeatable is: should
// its connection die under it, it is read once more on another, and rows
// sees the new read's rows. So rows must replace, not add to, what it kept
// of a read before.
func QueryInTenant(ctx context.Context, pool Acquirer, tenant, sql string, args []any, rows func(pgx.Rows) error) error {
	return inPipeline(ctx, pool, tenant, readOnly, sql, args, rows)
}

// inPipeline runs one statement of kind in a transaction of its own, sent
// with its scope in one round trip, and again on another connection
// should it meet a dead one: QueryInTenant's read, or a write that is
// repeatable (RowWriterWithoutFlush).
func inPipeline(ctx context.Context, pool Acquirer, tenant string, kind pipelined, sql string, args []any, rows func(pgx.Rows) error) error {
	if err := ValidateTenantID(tenant); err != nil {
		return err
	}
	again := retrier{conn: pool}
	for {
		seen := false
		err := inPipelineOnce(ctx, pool, tenant, kind, sql, args, func(r pgx.Rows) error {
			seen = true
			return rows(r)
		})
		if !again.after(ctx, err, seen, true) {
			return err
		}
	}
}

// inPipelineOnce is one attempt of inPipeline.
func inPipelineOnce(ctx context.Context, pool Acquirer, tenant string, kind pipelined, sql string, args []any, rows func(pgx.Rows) error) error {
	sc := scopeOf(pool)
	limits := sc.limits
	b := &pgx.Batch{}
	scopeArgs := []any{tenant}
	if sc.webhooksFor != nil {
		scopeArgs = append(scopeArgs, sc.webhooksFor(tenant))
	}
	b.Queue(pipelineScope(sc, kind), scopeArgs...)
	b.Queue(sql, args...).Query(rows)
	if bounded, ok := pool.(*Bounded); ok && limits.Deadline() > 0 {
		conn, _, release, err := acquireBounded(ctx, bounded, limits)
		if err != nil {
			return err
		}
		defer release()
		return conn.SendBatch(ctx, b).Close()
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return conn.SendBatch(ctx, b).Close()
}

// acquireBounded takes a connection of b for one transaction under
// limits and bounds it by their deadline: the wait for it (a connect, or
// the ping of an idle one), and every read and write on it until release,
// which lifts the deadline and returns it to the pool. It returns the
// connection, its deadline and its release. A deadline that passes fails
// the statement waiting and closes the connection, which the pool then
// discards.
func acquireBounded(ctx context.Context, b *Bounded, limits Limits) (*pgxpool.Conn, time.Time, func(), error) {
	d := limits.Deadline()
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pc, err := b.Acquire(actx)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	until := time.Now().Add(d)
	setDeadline(pc, until)
	return pc, until, func() {
		// A connection pgx closed (its deadline passed under a
		// statement) keeps the deadline its closing drains what
		// Postgres still sends under (pgx's, or the one kept:
		// deadlineKeeper); lifted, a silent server would hold the
		// drain, and the socket, until TCP gave up.
		if !pc.Conn().IsClosed() {
			setDeadline(pc, time.Time{})
		}
		pc.Release()
	}, nil
}
