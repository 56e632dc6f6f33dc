package database_test

import (
	"context"
	"testing"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestMigrationsGoDownToZeroAndUpAgain runs every Down migration, newest
// first, on a migrated database, and then every Up again: each Down undoes
// its Up well enough for the Up to apply anew.
func TestMigrationsGoDownToZeroAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := database.NewMigrator(ctx, testdb.NewEmpty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := m.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v == 0 {
			break
		}
		if _, err := m.Down(ctx); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v, err := m.Version(ctx); err != nil || v != m.Latest() {
		t.Fatalf("version %d (%v), want %d", v, err, m.Latest())
	}
}
