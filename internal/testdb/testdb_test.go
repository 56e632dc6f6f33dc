package testdb

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestResolveServerWithoutURL exercises the path a machine without
// TEST_DATABASE_URL takes: a container where a Docker engine answers, and
// otherwise an error that says how to get a database — never a skip.
func TestResolveServerWithoutURL(t *testing.T) {
	t.Parallel()
	url, err := resolveServer("")
	if err != nil {
		if !strings.Contains(err.Error(), "Set "+EnvURL+" to a superuser URL") {
			t.Fatalf("the error does not say how to get a database: %v", err)
		}
		return
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("the container's URL does not connect: %v", err)
	}
	conn.Close(context.Background())
}

func TestResolveServerPrefersTheEnvironment(t *testing.T) {
	t.Parallel()
	if got, err := resolveServer("postgres://x@y/z"); err != nil || got != "postgres://x@y/z" {
		t.Fatalf("resolveServer = %q, %v", got, err)
	}
}
