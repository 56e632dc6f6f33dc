package database

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDeadOnArrival: a transaction is begun again only on a connection
// whose backend is gone (class 08, 57P01–57P03) or that closed without a
// word; never after a timeout, a cancelled call, a failed connect or
// another error.
func TestDeadOnArrival(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("begin: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: &timeoutError{}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"admin shutdown", context.Background(), pg("57P01"), true},
		{"crash shutdown", context.Background(), pg("57P02"), true},
		{"cannot connect now", context.Background(), pg("57P03"), true},
		{"connection failure", context.Background(), pg("08006"), true},
		{"closed", context.Background(), fmt.Errorf("begin: %w", pgconn.ErrConnClosed), true},
		{"cut short", context.Background(), fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"statement cancelled", context.Background(), pg("57014"), false},
		{"serialization", context.Background(), pg("40001"), false},
		{"io timeout", context.Background(), fmt.Errorf("read: %w", timeout), false},
		{"connect", context.Background(), &pgconn.ConnectError{}, false},
		{"caller gone", cancelled, pg("57P01"), false},
		{"none", context.Background(), nil, false},
	}
	for _, tt := range tests {
		if got := deadOnArrival(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: deadOnArrival = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }
