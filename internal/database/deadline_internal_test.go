package database

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestDeadlineKeptPastACancel: a statement whose context ends, and which
// returns anyway (its answer arrived as the context ended), leaves its
// connection the deadline the connection keeps — a later read that waits
// fails at it — not none, as pgx's default handler would; and a
// connection that keeps none has none again.
func TestDeadlineKeptPastACancel(t *testing.T) {
	t.Parallel()
	read := func(c net.Conn) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			done <- err
		}()
		return done
	}

	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	k := &deadlineKeeper{conn: client}
	k.keep(time.Now().Add(200 * time.Millisecond))
	k.HandleCancel(context.Background())
	k.HandleUnwatchAfterCancel()
	select {
	case err := <-read(client):
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a read past the kept deadline: %v, want it exceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read past the kept deadline still waits: the cancel lifted it")
	}

	client, server = net.Pipe()
	defer client.Close()
	defer server.Close()
	k = &deadlineKeeper{conn: client}
	k.keep(time.Now().Add(time.Hour))
	k.keep(time.Time{})
	k.HandleCancel(context.Background())
	k.HandleUnwatchAfterCancel()
	got := read(client)
	time.Sleep(50 * time.Millisecond) // a deadline left at the cancel's "now" fails the read at once
	if _, err := server.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a read on a connection that keeps no deadline: %v", err)
	}
}
