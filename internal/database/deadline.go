package database

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deadlineKey names a connection's deadlineKeeper among its pgconn
// CustomData.
const deadlineKey = "orangerail.deadline"

// deadlineKeeper is how the pools KeepDeadlines configures (Open's and
// OpenDatasource's) watch a statement's context: as pgx's default (pgconn.DeadlineContextWatcherHandler),
// a context that ends under a statement sets its connection's deadline to
// now, failing the read or write that waits; but where pgx's, once the
// statement returns, lifts every deadline, this one restores the deadline
// the connection keeps: a bounded transaction's (acquireBounded). A
// statement whose context ends just as its answer arrives returns, its
// connection sound, and the rest of its transaction — the rollback its
// ended context brings on, say — would otherwise run without a deadline,
// hanging on a server that stopped answering until TCP gave up.
type deadlineKeeper struct {
	conn net.Conn
	// kept is the deadline the connection keeps, as Unix nanoseconds;
	// 0: none.
	kept atomic.Int64
}

// KeepDeadlines has a pool's connections keep a bounded transaction's
// deadline past a statement whose context ends (deadlineKeeper). Open and
// OpenDatasource apply it; a pool made another way for the server's
// transactions should too.
func KeepDeadlines(c *pgxpool.Config) {
	c.ConnConfig.BuildContextWatcherHandler = keepDeadlines
}

// keepDeadlines is KeepDeadlines' pgconn.Config.BuildContextWatcherHandler.
func keepDeadlines(pc *pgconn.PgConn) ctxwatch.Handler {
	k := &deadlineKeeper{conn: pc.Conn()}
	pc.CustomData()[deadlineKey] = k
	return k
}

func (k *deadlineKeeper) HandleCancel(context.Context) {
	_ = k.conn.SetDeadline(time.Now())
}

func (k *deadlineKeeper) HandleUnwatchAfterCancel() {
	_ = k.conn.SetDeadline(k.deadline())
}

// keep sets the connection's deadline to t, and keeps it past a statement
// whose context ends; the zero time lifts it.
func (k *deadlineKeeper) keep(t time.Time) {
	var n int64
	if !t.IsZero() {
		n = t.UnixNano()
	}
	k.kept.Store(n)
	_ = k.conn.SetDeadline(t)
}

// deadline is the deadline kept, or the zero time.
func (k *deadlineKeeper) deadline() time.Time {
	if n := k.kept.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// setDeadline sets the deadline of pc's connection to t (the zero time:
// none), kept past a statement whose context ends when pc's pool keeps
// deadlines (KeepDeadlines).
func setDeadline(pc *pgxpool.Conn, t time.Time) {
	c := pc.Conn().PgConn()
	if k, ok := c.CustomData()[deadlineKey].(*deadlineKeeper); ok {
		k.keep(t)
		return
	}
	_ = c.Conn().SetDeadline(t)
}
