package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/store"
)

// TestInterpretError holds the table behind InterpretError: each driver
// error matches its sentinel (and the sentinel's parents), keeps its text,
// and stays reachable with errors.As and errors.Is.
func TestInterpretError(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("run: %w", &pgconn.PgError{Code: code, Message: "said " + code})
	}
	tests := []struct {
		err  error
		want []error // the sentinels it must match
		not  []error // sentinels it must not match
	}{
		{pgx.ErrNoRows, []error{store.ErrNotFound}, []error{store.ErrConflict}},
		{pg("ORA01"), []error{store.ErrAppendOnly}, []error{store.ErrAuditEntryInvalid}},
		{pg("ORA02"), []error{store.ErrAuditEntryInvalid}, []error{store.ErrRecordMismatch}},
		{pg("ORA03"), []error{store.ErrTenantMismatch}, nil},
		{pg("ORA04"), []error{store.ErrLifecycle}, nil},
		{pg("ORA05"), []error{store.ErrRecordMismatch, store.ErrAuditEntryInvalid}, nil},
		{pg("ORA06"), []error{store.ErrNotOperator}, []error{store.ErrAuditEntryInvalid}},
		{pg("ORA07"), []error{store.ErrCheckpointMismatch}, []error{store.ErrAuditEntryInvalid}},
		{pg("23505"), []error{store.ErrConflict, store.ErrConstraint}, []error{store.ErrCheckViolation}},
		{pg("23514"), []error{store.ErrCheckViolation, store.ErrConstraint}, []error{store.ErrConflict}},
		{pg("23503"), []error{store.ErrConstraint}, []error{store.ErrConflict, store.ErrCheckViolation}},
		{pg("22P02"), []error{store.ErrMalformedValue, store.ErrInvalidValue}, nil},
		{pg("22021"), []error{store.ErrMalformedValue, store.ErrInvalidValue}, nil},
		{pg("22008"), []error{store.ErrMalformedValue, store.ErrInvalidValue}, nil},
		{pg("22P05"), []error{store.ErrMalformedValue, store.ErrInvalidValue}, nil},
		{pg("22012"), []error{store.ErrInvalidValue}, []error{store.ErrMalformedValue}},
		{pg("42501"), []error{store.ErrPermission}, []error{store.ErrSchemaMismatch}},
		{pg("42P01"), []error{store.ErrSchemaMismatch}, []error{store.ErrPermission}},
		{pg("42704"), []error{store.ErrSchemaMismatch}, nil},
		{pg("40001"), []error{store.ErrSerialization}, nil},
		{pg("40P01"), []error{store.ErrSerialization}, nil},
		{pg("57014"), []error{store.ErrStatementTimeout, store.ErrTimeout}, []error{store.ErrUnavailable}},
		{pg("55P03"), []error{store.ErrLockNotAvailable, store.ErrTimeout}, []error{store.ErrStatementTimeout}},
		{pg("57P01"), []error{store.ErrUnavailable}, []error{store.ErrTimeout}},
		{pg("08006"), []error{store.ErrUnavailable}, nil},
		{pg("28P01"), []error{store.ErrLoginRefused}, nil},
		{pg("3D000"), []error{store.ErrLoginRefused}, nil},
		// A connection that died under a statement, without a word.
		{fmt.Errorf("failed to deallocate cached statement(s): %w", pgconn.ErrConnClosed), []error{store.ErrUnavailable}, []error{store.ErrTimeout}},
		{fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), []error{store.ErrUnavailable}, nil},
		{fmt.Errorf("read: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), []error{store.ErrUnavailable}, nil},
		{fmt.Errorf("query: %w", context.Canceled), []error{store.ErrCanceled}, []error{store.ErrTimeout}},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), []error{store.ErrDeadline, store.ErrTimeout}, []error{store.ErrCanceled}},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			got := store.InterpretError(tt.err)
			for _, s := range tt.want {
				if !errors.Is(got, s) {
					t.Errorf("does not match %v", s)
				}
			}
			for _, s := range tt.not {
				if errors.Is(got, s) {
					t.Errorf("matches %v", s)
				}
			}
			if got.Error() != tt.err.Error() {
				t.Errorf("text %q, want the driver's %q", got, tt.err)
			}
			if !errors.Is(got, tt.err) {
				t.Error("the driver's error is not reachable")
			}
			var pgErr *pgconn.PgError
			if errors.As(tt.err, &pgErr) && !errors.As(got, &pgErr) {
				t.Error("the *pgconn.PgError is not reachable")
			}
			if again := store.InterpretError(got); again != got { //nolint:errorlint // the very same error, not one like it
				t.Error("interpreting twice wraps twice")
			}
		})
	}

	if store.InterpretError(nil) != nil {
		t.Error("nil is not nil")
	}
	for _, err := range []error{errors.New("plain"), &pgconn.PgError{Code: "XX000"}, &pgconn.PgError{Code: "P0001"}} {
		if got := store.InterpretError(err); got != err { //nolint:errorlint // the very same error, not one like it
			t.Errorf("%v: an error no sentinel describes came back as %v", err, got)
		}
	}
}
