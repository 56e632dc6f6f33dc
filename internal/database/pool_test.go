package database

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://alice:s3cret@db.example.com:6432/orders":           "postgres://alice@db.example.com:6432/orders",
		"postgres://alice@db.example.com/orders?password=s3cret":       "postgres://alice@db.example.com:5432/orders",
		"host=db.example.com user=alice password=s3cret dbname=orders": "postgres://alice@db.example.com:5432/orders",
		"postgres://postgres@/demo?host=%2Ftmp%2Fpg%20dir&port=54329":  "postgres://postgres@/demo?host=%2Ftmp%2Fpg+dir&port=54329",
		"postgres://[::1": "(unparseable database URL)",
	} {
		got := RedactURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]bool{
		"postgres://alice:s3cret@h/d": true, "postgres://alice@h/d?password=x": true, "host=h password=x": true,
		"postgres://alice@h/d": false, "host=h user=alice": false,
	} {
		if HasPassword(in) != want {
			t.Errorf("HasPassword(%q) != %v", in, want)
		}
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://alice@db.example.com:6432/orders?sslmode=disable": "postgres://alice@db.example.com:6432/demo?sslmode=disable",
		"postgresql://alice@db.example.com":                           "postgresql://alice@db.example.com/demo",
		"postgres://postgres@/postgres?host=%2Ftmp%2Fpg":              "postgres://postgres@/demo?host=%2Ftmp%2Fpg",
	} {
		if got, err := WithDatabase(in, "demo"); err != nil || got != want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"host=db.example.com dbname=orders", "mysql://alice@h/d", "postgres://[::1"} {
		if _, err := WithDatabase(in, "demo"); errcode.Of(err) != errcode.DatabaseURLInvalid {
			t.Errorf("WithDatabase(%q) = %v, want %s", in, err, errcode.DatabaseURLInvalid)
		}
	}
}

// TestClassifyRoleError: the store's reading of why a connection could not
// assume the runtime role becomes the code that names the fix.
func TestClassifyRoleError(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]errcode.Code{
		pgerrcode.UndefinedObject:       errcode.DatabaseUnmigrated,
		pgerrcode.InsufficientPrivilege: errcode.DatabaseRoleMissing,
		pgerrcode.AdminShutdown:         "",
	} {
		err := classifyRoleError(store.InterpretError(&pgconn.PgError{Code: code}))
		if errcode.Of(err) != want {
			t.Errorf("%s: %v, want %q", code, err, want)
		}
	}
}

// TestClassifyConnectErrorSaysATLSFailureIsNoNetworkOne: a certificate
// that did not verify is said as such, not as a server that did not
// answer, which would send an operator to the network.
func TestClassifyConnectErrorSaysATLSFailureIsNoNetworkOne(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://u@db.example.com:5432/d?sslmode=verify-full")
	if err != nil {
		t.Fatal(err)
	}
	tlsErr := &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "db.example.com"}}
	got := ClassifyConnectError(cfg, fmt.Errorf("failed to connect: %w", tlsErr))
	if errcode.Of(got) != errcode.DatabaseUnreachable || !strings.Contains(got.Error(), "db.example.com:5432 answered, but its TLS certificate did not verify: x509:") {
		t.Fatalf("got %v", got)
	}
}
