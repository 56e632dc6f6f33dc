package devdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestFindPrefersDatabaseURL(t *testing.T) {
	t.Parallel()
	got, err := Find(context.Background(), Options{Env: "postgres://example/db", LocalURL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2"})
	if err != nil || got.URL != "postgres://example/db" || got.Source != SourceEnv {
		t.Fatalf("Find = %+v, %v", got, err)
	}
}

func TestFindCreatesTheDemoDatabaseOnTheLocalServer(t *testing.T) {
	t.Parallel()
	server := testdb.ServerURL(t)
	name := fmt.Sprintf("orangerail_devdb_%d", os.Getpid())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(context.Background())
		}
	})
	for range 2 { // the second run finds the database the first made
		got, err := Find(context.Background(), Options{LocalURL: server, Database: name})
		if err != nil || got.Source != SourceLocal || got.StopFunc != nil {
			t.Fatalf("Find = %+v, %v", got, err)
		}
		conn, err := pgx.Connect(context.Background(), got.URL)
		if err != nil {
			t.Fatalf("connect to %s: %v", got.URL, err)
		}
		conn.Close(context.Background())
	}
}

// TestFindStartsAPrivateCluster starts a real cluster from the local
// Postgres binaries, as `make run` does on a machine with no server.
func TestFindStartsAPrivateCluster(t *testing.T) {
	t.Parallel()
	if _, err := binDir(); err != nil {
		// Without binaries Find must say how to get a database.
		_, err := Find(context.Background(), Options{LocalURL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2", Dir: t.TempDir()})
		if errcode.Of(err) != errcode.NoDatabaseAvailable {
			t.Fatalf("Find without binaries = %v, want %s", err, errcode.NoDatabaseAvailable)
		}
		return
	}
	port := testdb.FreePort(t)
	dir := filepath.Join(t.TempDir(), "postgres")
	got, err := Find(context.Background(), Options{LocalURL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2", Dir: dir, Port: port})
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	t.Cleanup(func() {
		if err := got.StopFunc(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := os.RemoveAll(got.Dir); err != nil {
			t.Errorf("remove %s: %v", got.Dir, err)
		}
	})
	if got.Source != SourcePrivate {
		t.Fatalf("source = %s", got.Source)
	}
	conn, err := pgx.Connect(context.Background(), got.URL)
	if err != nil {
		t.Fatalf("connect to the private cluster: %v", err)
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil || db != DemoDatabase {
		t.Fatalf("current_database = %q, %v", db, err)
	}
	// Only the socket, in a directory only its owner enters, reaches it.
	if tcp, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)); err == nil {
		tcp.Close(context.Background())
		t.Fatal("the private cluster accepts TCP connections")
	}
	info, err := os.Stat(got.Dir)
	if err != nil || info.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the cluster's directory is open to others: %v %v", info.Mode(), err)
	}
}
