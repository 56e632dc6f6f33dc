package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/migrations"
)

// VersionTable is the goose version table, in the login's default schema
// (public): it must exist before the orangerail schema does.
const VersionTable = "orangerail_schema_version"

// Migrator applies orangerail's embedded migrations. Migrations of one
// database are serialized across processes by a Postgres advisory lock.
// A Migrator is safe for use by one goroutine at a time.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	store    database.Store
	latest   int64
}

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus = goose.MigrationStatus

// NewMigrator connects to the database named by url. It does not change the
// database; Close releases the connection.
func NewMigrator(ctx context.Context, url string) (*Migrator, error) {
	cfg, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	sqlDB := stdlib.OpenDB(*cfg.ConnConfig)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, ClassifyConnectError(cfg.ConnConfig, err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	store, err := database.NewStore(database.DialectPostgres, VersionTable)
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	provider, err := goose.NewProvider("", sqlDB, migrations.FS,
		goose.WithStore(store), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	sources := provider.ListSources()
	return &Migrator{db: sqlDB, provider: provider, store: store, latest: sources[len(sources)-1].Version}, nil
}

// Close releases the Migrator's connections. It is safe to call more than once.
func (m *Migrator) Close() error { return m.db.Close() }

// Latest returns the newest migration version this binary knows.
func (m *Migrator) Latest() int64 { return m.latest }

// Version returns the database's applied version: 0 when it has none.
// It changes nothing.
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	exists, err := m.store.(interface {
		TableExists(context.Context, database.DBTxConn) (bool, error)
	}).TableExists(ctx, m.db)
	if err != nil || !exists {
		return 0, err
	}
	v, err := m.store.GetLatestVersion(ctx, m.db)
	if errors.Is(err, database.ErrVersionNotFound) {
		return 0, nil
	}
	return v, err
}

// Check returns nil when the database is at exactly the version this binary
// knows, and an *errcode.Error saying which way it is off otherwise.
func (m *Migrator) Check(ctx context.Context) error {
	v, err := m.Version(ctx)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InsufficientPrivilege:
		// Every login orangerail runs as may read the version: a member
		// of the runtime role or of the auditors'.
		return errcode.New(errcode.DatabaseRoleMissing, fmt.Sprintf("this login may not read the schema's version (%s): "+
			"it is a member of neither %s nor %s", VersionTable, RuntimeRole, AuditorRole), err)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	}
	return m.compare(v)
}

func (m *Migrator) compare(v int64) error {
	switch {
	case v > m.latest:
		return errcode.New(errcode.DatabaseTooNew,
			fmt.Sprintf("the database is at schema version %d, newer than this binary knows (%d)", v, m.latest), nil)
	case v < m.latest:
		return errcode.New(errcode.DatabaseUnmigrated,
			fmt.Sprintf("the database is at schema version %d; this binary needs %d", v, m.latest), nil)
	}
	return nil
}

// refuseNewer refuses a database migrated by a newer binary: this one does
// not know its schema, so it touches nothing.
func (m *Migrator) refuseNewer(ctx context.Context) error {
	v, err := m.Version(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := m.compare(v); errcode.Of(err) == errcode.DatabaseTooNew {
		return err
	}
	return nil
}

// Up applies every pending migration. On a current database it does
// nothing; on a database newer than this binary it refuses, as it does
// when a newer binary migrated it while this one waited for the lock.
//
// A migration that lost a race with another database's migration of the
// same cluster (roles and their settings are the cluster's, and Postgres
// fails the second of two concurrent changes of one role rather than
// wait: "tuple concurrently updated") rolled back whole; it is run again,
// up to upAttempts times.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	if err := m.refuseNewer(ctx); err != nil {
		return nil, err
	}
	var applied []*goose.MigrationResult
	for attempt := 1; ; attempt++ {
		results, err := m.provider.Up(ctx)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			results = partial.Applied
		}
		applied = append(applied, results...)
		if err == nil {
			return applied, m.refuseNewer(ctx)
		}
		if !lostClusterRace(err) || attempt == upAttempts {
			return applied, fmt.Errorf("migrate up: %w", err)
		}
		select {
		case <-ctx.Done():
			return applied, fmt.Errorf("migrate up: %w", err)
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// upAttempts bounds Up's runs of a migration that lost a race with
// another database's.
const upAttempts = 5

// lostClusterRace reports whether err is a migration's transaction failed
// by a concurrent one, of this database or another of the cluster: a
// serialization failure, a deadlock, or Postgres's refusal to wait on a
// catalog row another transaction changed (XX000 "tuple concurrently
// updated", which ALTER ROLE meets).
func lostClusterRace(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected:
		return true
	case pgerrcode.InternalError:
		return pgErr.Message == "tuple concurrently updated"
	}
	return false
}

// HardeningGap is a part of the database's hardening that is missing —
// of the read-only SQL tool's database-level layer, which the migrations
// could not put in place (they need a superuser), or a power one of
// orangerail's roles should not hold (migrations/00053) — and the
// statement a superuser runs to close it.
type HardeningGap struct {
	Gap, Fix string
}

// HardeningGaps lists what orangerail.hardening_gaps finds missing: none
// on a database a superuser migrated whose roles hold no power they should
// not. A database older than the function has none listed.
func (m *Migrator) HardeningGaps(ctx context.Context) ([]HardeningGap, error) {
	var exists bool
	if err := m.db.QueryRowContext(ctx, "SELECT to_regprocedure('orangerail.hardening_gaps()') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := m.db.QueryContext(ctx, "SELECT gap, fix FROM orangerail.hardening_gaps()")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var gaps []HardeningGap
	for rows.Next() {
		var g HardeningGap
		if err := rows.Scan(&g.Gap, &g.Fix); err != nil {
			return nil, err
		}
		gaps = append(gaps, g)
	}
	return gaps, rows.Err()
}

// Down rolls back the most recent migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	if err := m.refuseNewer(ctx); err != nil {
		return nil, err
	}
	current, err := m.Version(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.refuseDroppingEvidence(ctx, current-1); err != nil {
		return nil, err
	}
	result, err := m.provider.Down(ctx)
	if err != nil {
		return result, rollbackError("migrate down", err)
	}
	return result, nil
}

// evidence is what a migration's Down drops with its tables that an
// incident is read from: the audit log and the approvals (00001 drops the
// schema), the signed checkpoints (00016).
var evidence = []struct {
	version int64
	tables  []string
	what    string
}{
	{1, []string{"orangerail.audit", "orangerail.approvals"}, "the audit log and the approvals"},
	{16, []string{"orangerail.audit_checkpoints"}, "the signed checkpoints"},
}

// refuseDroppingEvidence refuses, X_ROLLBACK_REFUSED, a rollback to
// version that would run a Down dropping evidence a table of it holds: no
// schema change erases the record. Whether a table holds rows is read
// from its size on disk, not by counting: row security shows the owner
// only some of them, or none. A table once written to counts as holding
// rows.
func (m *Migrator) refuseDroppingEvidence(ctx context.Context, version int64) error {
	current, err := m.Version(ctx)
	if err != nil {
		return err
	}
	for _, e := range evidence {
		if current < e.version || version >= e.version {
			continue
		}
		for _, table := range e.tables {
			var held bool
			if err := m.db.QueryRowContext(ctx, "SELECT coalesce(pg_relation_size(to_regclass($1)) > 0, false)", table).Scan(&held); err != nil {
				return err
			}
			if held {
				return errcode.New(errcode.RollbackRefused, fmt.Sprintf(
					"rolling back migration %05d drops %s, and %s holds data: no rollback erases them. "+
						"Keep a copy first (pg_dump --schema=orangerail) and, if you mean to lose them, drop the schema by hand", e.version, e.what, table), nil)
			}
		}
	}
	return nil
}

// rollbackRefused is the SQLSTATE a migration's Down raises when rolling
// back would lose or misread rows the database holds; the message names
// them, the hint says what to do.
const rollbackRefused = "ORA09"

// rollbackError is err, of the rollback what, coded X_ROLLBACK_REFUSED
// where a Down refused: the rows it names are the operator's to act on.
func rollbackError(what string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == rollbackRefused {
		msg := pgErr.Message
		if pgErr.Hint != "" {
			msg += ". " + pgErr.Hint
		}
		return errcode.New(errcode.RollbackRefused, what+": "+msg, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CheckCurrent reports whether the database at url has this binary's
// schema: migrated, and not by a newer orangerail.
func CheckCurrent(ctx context.Context, url string) error {
	m, err := NewMigrator(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	return m.Check(ctx)
}

// DownTo rolls back every applied migration newer than version, newest
// first; DownTo(ctx, 0) undoes them all.
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]*goose.MigrationResult, error) {
	if err := m.refuseNewer(ctx); err != nil {
		return nil, err
	}
	if err := m.refuseDroppingEvidence(ctx, version); err != nil {
		return nil, err
	}
	results, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return results, rollbackError(fmt.Sprintf("migrate down to %d", version), err)
	}
	return results, nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*MigrationStatus, error) {
	return m.provider.Status(ctx)
}

// MigrateUp applies every pending migration to the database at url.
func MigrateUp(ctx context.Context, url string) error {
	m, err := NewMigrator(ctx, url)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}
