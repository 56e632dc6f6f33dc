package database_test

import (
	"context"
	"sync"
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
	url := testdb.NewEmpty(t)
	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var schemaLeft bool
	if err := testdb.Pool(t, url).QueryRow(ctx, "SELECT to_regnamespace('orangerail') IS NOT NULL").Scan(&schemaLeft); err != nil || schemaLeft {
		t.Fatalf("after going down to zero the orangerail schema is still there (%v)", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v, err := m.Version(ctx); err != nil || v != m.Latest() {
		t.Fatalf("version %d (%v), want %d", v, err, m.Latest())
	}
}

// TestDatabasesOfOneClusterMigrateAtOnce: several databases of one cluster
// (an instance each) migrated at the same time all migrate. Roles are the
// cluster's: two migrations changing one role at once make Postgres fail
// the second ("tuple concurrently updated"), which Up runs again.
func TestDatabasesOfOneClusterMigrateAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for round := range 2 {
		urls := make([]string, 4)
		for i := range urls {
			urls[i] = testdb.NewEmpty(t)
		}
		errs := make([]error, len(urls))
		var wg sync.WaitGroup
		for i, url := range urls {
			wg.Go(func() { errs[i] = database.MigrateUp(ctx, url) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, database %d: %v", round, i, err)
			} else if err := database.CheckCurrent(ctx, urls[i]); err != nil {
				t.Errorf("round %d, database %d: %v", round, i, err)
			}
		}
	}
}
