package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// partition forwards TCP connections to a server until it cuts them; then
// it drops what either side of a cut connection sends and never closes
// one side when the other closes: what a client sees of a network
// partition, and what the server does not see of it — its connections
// stay open and silent. Connections made after the cut pass (a cancel
// request's, say), so that the client's own clean-up does not wait on it.
type partition struct {
	ln net.Listener

	mu    sync.Mutex
	links []*link
}

// link is one forwarded connection: the client's side, the server's, and
// whether it was cut.
type link struct {
	client, server net.Conn
	cut            atomic.Bool
}

// newPartition listens on 127.0.0.1 and forwards to target (host:port).
func newPartition(t *testing.T, target string) *partition {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{ln: ln}
	go p.serve(target)
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
	})
	return p
}

// closeAll closes both sides of every connection: the partition heals
// with the connections it cut reset, so a client draining one (pgx does,
// closing it) stops waiting.
func (p *partition) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		_ = l.client.Close()
		_ = l.server.Close()
	}
}

func (p *partition) serve(target string) {
	var d net.Dialer
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := d.Dial("tcp", target)
		if err != nil {
			_ = client.Close()
			continue
		}
		l := &link{client: client, server: server}
		p.mu.Lock()
		p.links = append(p.links, l)
		p.mu.Unlock()
		go l.pipe(server, client)
		go l.pipe(client, server)
	}
}

// cutAll cuts every connection made so far.
func (p *partition) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.cut.Store(true)
	}
}

// pipe copies src to dst until src ends, dropping what arrives once the
// link is cut; dst is closed with src only before the cut.
func (l *link) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if l.cut.Load() {
			if err != nil {
				return
			}
			continue
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// TestPartitionedTransactionEndsOnTheServer: a bounded transaction whose
// client is cut off from Postgres while it holds a row lock fails at its
// deadline on the client's side; and on the server's side, which hears
// nothing of it, the backend ends the transaction once it has been idle
// that long, releasing the lock. Without the server's bound the backend
// would sit idle in transaction, the row locked against every other
// client, until TCP keepalive noticed — hours, by default.
func TestPartitionedTransactionEndsOnTheServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, "CREATE TABLE held (id int PRIMARY KEY); INSERT INTO held VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition(t, u.Host)
	u.Host = p.ln.Addr().String()
	limits := database.Limits{LockTimeout: 100 * time.Millisecond, StatementTimeout: 300 * time.Millisecond}
	bounded := database.Bound(testdb.Pool(t, u.String()), limits)
	t.Cleanup(p.closeAll) // before the pool's Close, which would drain the cut connection

	// The bound is the transaction's own, and ends with it; the
	// transaction knows it.
	var idle string
	var limit time.Duration
	err = database.InTenant(ctx, bounded, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		limit, _ = database.IdleLimit(tx)
		return tx.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&idle)
	})
	// The lock timeout, twice the statement timeout and the 5s grace.
	if want := "5700ms"; err != nil || idle != want || limit != 5700*time.Millisecond {
		t.Fatalf("a bounded transaction's idle bound: %q, IdleLimit %s (%v), want %q", idle, limit, err, want)
	}
	err = database.InTenant(ctx, admin, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if d, ok := database.IdleLimit(tx); ok {
			return fmt.Errorf("an unbounded transaction has the idle limit %s", d)
		}
		if d, ok := database.Deadline(tx); ok {
			return fmt.Errorf("an unbounded transaction has the deadline %s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var pid int
	started := time.Now()
	err = database.InTenant(ctx, bounded, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM held WHERE id = 1 FOR UPDATE").Scan(&pid); err != nil {
			return err
		}
		p.cutAll()
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	if err == nil {
		t.Fatal("a transaction cut off from its server committed")
	}
	t.Logf("the client gave up after %s: %v", time.Since(started).Round(time.Millisecond), err)

	// The backend ends its session within its idle bound of the cut (and a
	// margin for a loaded machine), and the row is free.
	for {
		var state string
		err := admin.QueryRow(ctx, "SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(started); waited > 20*time.Second {
			t.Fatalf("the partitioned backend %d is still %q %s after the cut: it holds its transaction's locks", pid, state, waited.Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the backend ended %s after the cut", time.Since(started).Round(time.Millisecond))
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT FROM held WHERE id = 1 FOR UPDATE NOWAIT"); err != nil {
		t.Fatalf("the row the partitioned transaction locked: %v", err)
	}
}
