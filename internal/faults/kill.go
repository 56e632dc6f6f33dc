package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// AppName is the application_name of the connections a Killer's pool
// opens, so a test finds them in pg_stat_activity.
const AppName = "orangerail-faults"

// When is where, around a statement, a Trap terminates its backend.
type When int

// The places.
const (
	// Before: the backend is gone before the statement is sent.
	Before When = iota
	// During: the statement is sent, and the backend is terminated once
	// pg_stat_activity shows it running the statement (give it a
	// pg_sleep or a lock wait to be caught in).
	During
	// After: the statement completed; the backend is gone before the
	// next one.
	After
)

// Trap names the statement whose backend is terminated: the first one
// whose SQL contains every string of Match, and, when Arg is set, one of
// whose arguments contains Arg (an audit record's phase, say).
type Trap struct {
	Match []string
	Arg   string
	When  When
}

func (t *Trap) matches(data pgx.TraceQueryStartData) bool {
	for _, m := range t.Match {
		if !strings.Contains(data.SQL, m) {
			return false
		}
	}
	if t.Arg == "" {
		return true
	}
	for _, a := range data.Args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		default:
			s = fmt.Sprint(v)
		}
		if strings.Contains(s, t.Arg) {
			return true
		}
	}
	return false
}

// Killer is a pgx tracer that terminates, through a superuser pool, the
// backend serving the statement its armed Trap names, once: a stand-in
// for a backend that dies (a crash, an operator's pg_terminate_backend, a
// failover) at one chosen phase of the lifecycle. It is safe for
// concurrent use.
type Killer struct {
	admin *pgxpool.Pool
	mu    sync.Mutex
	trap  *Trap
	fired chan struct{}
	kills atomic.Int64
	errs  chan error
}

// NewKiller returns a Killer terminating backends through admin, a
// superuser pool.
func NewKiller(admin *pgxpool.Pool) *Killer {
	return &Killer{admin: admin, errs: make(chan error, 16)}
}

// Arm sets the trap the next matching statement springs, and returns a
// channel closed once it has.
func (k *Killer) Arm(t Trap) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.trap, k.fired = &t, make(chan struct{})
	return k.fired
}

// Kills counts the backends terminated.
func (k *Killer) Kills() int64 { return k.kills.Load() }

// Err returns the first error terminating a backend met, if any.
func (k *Killer) Err() error {
	select {
	case err := <-k.errs:
		return err
	default:
		return nil
	}
}

// take returns the armed trap when data springs it, disarming it; with
// only set, only a trap of that place springs.
func (k *Killer) take(data pgx.TraceQueryStartData, only ...When) (*Trap, chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.trap == nil || !k.trap.matches(data) || (len(only) > 0 && !slices.Contains(only, k.trap.When)) {
		return nil, nil
	}
	t, fired := k.trap, k.fired
	k.trap = nil
	return t, fired
}

type afterKey struct{}

// TraceQueryStart springs a Before, During or After trap.
func (k *Killer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t, fired := k.take(data)
	if t == nil {
		return ctx
	}
	return k.spring(ctx, conn, t, fired, data.SQL)
}

// TraceBatchStart springs a Before or After trap on a statement of a
// pipelined batch (a QueryInTenant read, a database.Queue's statements):
// Before, the backend is gone before the batch is sent; After, once the
// batch's answers came back, before the connection's next statement. A
// batch's statements are sent together, so no other place of one can be
// told apart.
func (k *Killer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	for _, q := range data.Batch.QueuedQueries {
		if t, fired := k.take(pgx.TraceQueryStartData{SQL: q.SQL, Args: q.Arguments}, Before, After); t != nil {
			return k.spring(ctx, conn, t, fired, "")
		}
	}
	return ctx
}

// spring terminates conn's backend where t says: now (Before), once it
// runs sql (During), or once the statement or batch that armed it has
// ended (After: the context returned carries the kill to TraceQueryEnd or
// TraceBatchEnd, which run it through ended). It closes fired once the
// backend is gone.
func (k *Killer) spring(ctx context.Context, conn *pgx.Conn, t *Trap, fired chan struct{}, sql string) context.Context {
	pid := conn.PgConn().PID()
	switch t.When {
	case Before:
		k.terminate(pid, "")
		close(fired)
	case During:
		go func() {
			k.terminate(pid, sql)
			close(fired)
		}()
	case After:
		return context.WithValue(ctx, afterKey{}, func() { k.terminate(pid, ""); close(fired) })
	}
	return ctx
}

// ended runs the After trap the start of ctx's statement or batch sprang.
func ended(ctx context.Context) {
	if f, ok := ctx.Value(afterKey{}).(func()); ok {
		f()
	}
}

// TraceBatchQuery implements pgx.BatchTracer.
func (k *Killer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd springs an After trap.
func (k *Killer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) { ended(ctx) }

// TraceQueryEnd springs an After trap.
func (k *Killer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) { ended(ctx) }

// terminate terminates pid and waits for it to exit; with running set,
// it first waits until the backend runs that statement.
func (k *Killer) terminate(pid uint32, running string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if running != "" {
		for {
			var active bool
			err := k.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query = $2)`,
				int32(pid), running).Scan(&active) //nolint:gosec // G115: a backend pid fits
			if err != nil {
				k.fail(fmt.Errorf("watch backend %d: %w", pid, err))
				return
			}
			if active {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var ok bool
	// With a timeout, pg_terminate_backend waits for the backend to exit.
	switch err := k.admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, int32(pid)).Scan(&ok); { //nolint:gosec // G115
	case err != nil:
		k.fail(fmt.Errorf("terminate backend %d: %w", pid, err))
		return
	case !ok:
		k.fail(fmt.Errorf("backend %d did not exit", pid))
		return
	}
	k.kills.Add(1)
}

func (k *Killer) fail(err error) {
	select {
	case k.errs <- err:
	default:
	}
}

// KillIdle terminates every backend of the Killer's pools in the
// database, busy or idle, and returns how many: a restart of every
// connection the pool holds.
func (k *Killer) KillIdle(ctx context.Context) (int, error) {
	var n int
	err := k.admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
		FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, AppName).Scan(&n)
	k.kills.Add(int64(n))
	return n, err
}

// RuntimePool opens the server's kind of pool on url (every connection
// acts as orangerail_runtime, as database.Open makes it), traced by k and
// named AppName. It is closed when the test ends.
func (k *Killer) RuntimePool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	cfg := RuntimePoolConfig(tb, url)
	cfg.ConnConfig.Tracer = k
	return NewPool(tb, cfg)
}

// RuntimePoolConfig is the config of the server's kind of pool on url,
// named AppName, for a test to trace or dial as it needs.
func RuntimePoolConfig(tb testing.TB, url string) *pgxpool.Config {
	tb.Helper()
	cfg, err := database.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = AppName
	database.KeepDeadlines(cfg)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return store.New(conn).SessionAssumeRuntime(ctx)
	}
	return cfg
}

// NewPool opens cfg's pool, closed when the test ends.
func NewPool(tb testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Require fails tb with every violated invariant.
func Require(tb testing.TB, owner *pgxpool.Pool, effects ...Effect) {
	tb.Helper()
	vs, err := Check(context.Background(), owner, effects...)
	if err != nil {
		tb.Fatalf("check invariants: %v", err)
	}
	for _, v := range vs {
		tb.Errorf("invariant violated: %s", v)
	}
}
