package database_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestClassifyCommandError: what Postgres and the driver answer a command
// that connected — a lock wait past lock_timeout, a connection that did
// not answer within its deadline, a backend gone under it — is one coded
// error each, the driver's words kept; anything else is left as it is.
func TestClassifyCommandError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(7001)"); err != nil {
		t.Fatal(err)
	}

	lockWait := func() error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if _, err := c.Exec(ctx, "SET lock_timeout = '50ms'"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "SELECT pg_advisory_lock(7001)")
		return err
	}
	// The connection's deadline met as the statement is sent: what a
	// bounded transaction meets on a server that stopped answering.
	deadline := func() error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		_ = c.Conn().PgConn().Conn().SetDeadline(time.Now().Add(-time.Second))
		_, err = c.Exec(ctx, "SELECT 1")
		return err
	}
	lost := func() error {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if _, err := holder.Exec(ctx, "SELECT pg_terminate_backend($1)", c.Conn().PgConn().PID()); err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "SELECT 1")
		return err
	}
	for _, tt := range []struct {
		name string
		err  func() error
		want errcode.Code
	}{
		{"lock timeout", lockWait, errcode.DatabaseTimeout},
		{"deadline", deadline, errcode.DatabaseTimeout},
		{"backend terminated", lost, errcode.DatabaseUnreachable},
	} {
		err := tt.err()
		if err == nil {
			t.Fatalf("%s: no error", tt.name)
		}
		if errcode.Of(err) != "" {
			t.Fatalf("%s: the driver's error is coded already (%v): the test shows nothing", tt.name, err)
		}
		got := database.ClassifyCommandError(err)
		if errcode.Of(got) != tt.want || !errors.Is(got, err) {
			t.Errorf("%s: %v coded %q, want %q wrapping it", tt.name, err, errcode.Of(got), tt.want)
		}
	}

	coded := errcode.New(errcode.TenantUnknown, "no such tenant", nil)
	plain := errors.New("plain")
	for _, err := range []error{nil, coded, plain} {
		if got := database.ClassifyCommandError(err); got != err { //nolint:errorlint // the very same error, not one like it
			t.Errorf("%v came back as %v", err, got)
		}
	}
}
