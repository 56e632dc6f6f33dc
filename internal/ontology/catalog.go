package ontology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/db"
)

// DiagnosticSchemaMismatch classifies a config that names tables, columns
// or statements the datasource does not have.
const DiagnosticSchemaMismatch = "datasource_schema_mismatch"

// Conn is what the catalog check needs of a datasource connection.
type Conn interface {
	db.DBTX
	Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error)
	Deallocate(ctx context.Context, name string) error
}

// QuotedTable returns an object's table as a quoted, possibly
// schema-qualified identifier.
func (o *Object) QuotedTable() string {
	return pgx.Identifier(strings.Split(o.Table, ".")).Sanitize()
}

// CheckCatalog checks the config against the datasource's live catalog:
// every object's table and columns exist, and every action's statement
// prepares (so its tables, columns and types are right). It returns every
// problem, each a DiagnosticSchemaMismatch; an error means the check itself
// could not run.
func (c *Config) CheckCatalog(ctx context.Context, conn Conn) (Problems, error) {
	var ps Problems
	q := db.New()
	for _, name := range slices.Sorted(maps.Keys(c.Objects)) {
		o, path := c.Objects[name], "objects."+name
		found, err := q.CatalogTableExists(ctx, conn, o.QuotedTable())
		if err != nil {
			return nil, err
		}
		if !found {
			ps = append(ps, Problem{Path: path + ".table", Message: fmt.Sprintf("%s: the datasource has no table %s", DiagnosticSchemaMismatch, o.QuotedTable())})
			continue
		}
		columns, err := q.CatalogTableColumns(ctx, conn, o.QuotedTable())
		if err != nil {
			return nil, err
		}
		missing := func(field, col string) {
			if !slices.Contains(columns, col) {
				ps = append(ps, Problem{Path: path + "." + field, Message: fmt.Sprintf("%s: table %s has no column %q", DiagnosticSchemaMismatch, o.QuotedTable(), col)})
			}
		}
		missing("tenant_column", o.TenantColumn)
		for i, f := range o.Fields {
			missing(fmt.Sprintf("fields.%d", i), f)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		a := c.Actions[name]
		if a.Execute.SQL == "" {
			continue
		}
		if err := prepares(ctx, conn, a.Execute.SQL); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return nil, err
			}
			ps = append(ps, Problem{Path: "actions." + name + ".execute.sql", Message: fmt.Sprintf("%s: the datasource cannot prepare the statement: %s", DiagnosticSchemaMismatch, pgErr.Message)})
		}
	}
	return ps.sorted(), nil
}

// prepares prepares a statement under a throwaway name and drops it.
func prepares(ctx context.Context, conn Conn, sql string) error {
	bound, _, err := BindSQL(sql)
	if err != nil {
		return err
	}
	const name = "orangerail_catalog_check"
	if _, err := conn.Prepare(ctx, name, bound); err != nil {
		return err
	}
	return conn.Deallocate(ctx, name)
}
