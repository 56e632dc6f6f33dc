// Package sqlquery runs an agent's read-only SQL in four layers, each of
// which must engage for the query to run: a dedicated low-privilege login
// on a connection used once, the statement run as a role without even that
// login's privileges (role), a read-only transaction whose snapshot
// a trusted statement takes first (transaction), the real Postgres grammar
// (parse, package sqlguard), and server-side limits on time, rows and
// bytes (limits).
package sqlquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/db"
	"github.com/orangerail/orangerail/internal/sqlguard"
)

// The layers, as Result.Guards names them.
const (
	GuardRole        = "role"
	GuardTransaction = "transaction"
	GuardParse       = "parse"
	GuardLimits      = "limits"
)

// Limits of one query.
const (
	Timeout  = 5 * time.Second
	MaxRows  = 1000
	MaxBytes = 256 << 10
)

// MaxConcurrent bounds the queries one Querier runs at once; more wait.
const MaxConcurrent = 4

// QueryRole is the login every query runs as.
const QueryRole = "orangerail_query"

// AgentRole is the role an agent's SQL runs as: the query login switches to
// it (SET LOCAL ROLE) before the statement. It has orangerail_readonly's
// rights and not the privileges of QueryRole, the login every tenant's
// query backend runs as, and Postgres lets a backend signal only backends
// whose login the current user has the privileges of: so no query can
// cancel or terminate another tenant's (or any) backend.
const AgentRole = "orangerail_query_agent"

// WorkMem bounds the memory each sort or hash of a query may take in the
// database before it spills to temporary files (which the query login's
// temp_file_limit bounds in turn; see migration 00004).
const WorkMem = "4MB"

// Result is a query's answer.
type Result struct {
	Columns []string `json:"columns"`
	// Rows are each row's values as a JSON array, encoded once: the byte
	// cap counts these bytes, and they are what the caller sends on.
	Rows []json.RawMessage `json:"rows"`
	// Guards are the layers that engaged for this query.
	Guards []string `json:"guards"`
	// TruncatedBy is "rows" or "bytes" when the answer was cut short.
	TruncatedBy string `json:"truncatedBy,omitempty"`
	Bytes       int    `json:"bytes"`
}

// Config configures a Querier.
type Config struct {
	// URL logs in as QueryRole. Required.
	URL string
	// Store is the runtime pool, which binds each query's backend to the
	// caller's tenant. Required.
	Store *pgxpool.Pool
	// Schemas is the search path a query sees. Defaults to orangerail.
	Schemas []string
}

// Querier runs read-only queries. It is safe for concurrent use: each query
// has a connection of its own.
type Querier struct {
	cfg   Config
	conn  *pgx.ConnConfig
	slots chan struct{}
	setup string // the statements that set a query's limits, search path and role
}

// New returns a Querier.
func New(c Config) (*Querier, error) {
	if c.Store == nil {
		return nil, errors.New("sqlquery: Config.Store is required")
	}
	pc, err := database.ParseURL(c.URL)
	if err != nil {
		return nil, err
	}
	if len(c.Schemas) == 0 {
		c.Schemas = []string{"orangerail"}
	}
	schemas := make([]string, len(c.Schemas))
	for i, s := range c.Schemas {
		schemas[i] = pgx.Identifier{s}.Sanitize()
	}
	// Trusted statements, sent as one simple-protocol message: SET LOCAL
	// reverts with the transaction, which is never committed.
	setup := strings.Join([]string{
		fmt.Sprintf("SET LOCAL statement_timeout = %d", Timeout.Milliseconds()),
		fmt.Sprintf("SET LOCAL work_mem = '%s'", WorkMem),
		"SET LOCAL search_path TO " + strings.Join(schemas, ", "),
		"SET LOCAL ROLE " + pgx.Identifier{AgentRole}.Sanitize(),
	}, "; ")
	return &Querier{cfg: c, conn: pc.ConnConfig, slots: make(chan struct{}, MaxConcurrent), setup: setup}, nil
}

// Schemas returns the search path a query sees.
func (q *Querier) Schemas() []string { return slices.Clone(q.cfg.Schemas) }

// RoleError says the query login is not the dedicated low-privilege role,
// or the role agent SQL would run as is not AgentRole without QueryRole's
// privileges, so the role layer could not engage and nothing ran.
type RoleError struct {
	Login string // session_user
	Role  string // current_user after the switch; empty when the login was refused
}

func (e *RoleError) Error() string {
	if e.Role != "" {
		return fmt.Sprintf("agent SQL would run as %q, not a plain %s without the privileges of %s: refusing to run it", e.Role, AgentRole, QueryRole)
	}
	return fmt.Sprintf("the query login is %q, not a plain %s: refusing to run agent SQL", e.Login, QueryRole)
}

// Query runs one agent statement for a tenant. A statement the parse layer
// refuses returns a *sqlguard.Refusal; a statement Postgres refuses returns
// its error (for the operator's log, never for the agent).
func (q *Querier) Query(ctx context.Context, tenant, sql string) (*Result, error) {
	if err := database.ValidateTenantID(tenant); err != nil {
		return nil, err
	}
	statement, err := sqlguard.Check(sql, q.cfg.Schemas)
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: []string{}, Rows: []json.RawMessage{}}
	err = q.session(ctx, tenant, func(ctx context.Context, tx pgx.Tx) error {
		// Every layer engaged, or session would not have called.
		res.Guards = []string{GuardRole, GuardTransaction, GuardParse, GuardLimits}
		return q.read(ctx, tx, statement, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// session runs fn in a transaction of a fresh query connection bound to
// tenant, with the role, transaction and limits layers engaged: fn's
// statements run as AgentRole, read-only, under the limits.
func (q *Querier) session(ctx context.Context, tenant string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	// Each query holds a connection of its own for up to Timeout: bound how
	// many it may hold, so a burst cannot use up the server's connections.
	select {
	case q.slots <- struct{}{}:
		defer func() { <-q.slots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	conn, err := pgx.ConnectConfig(ctx, q.conn.Copy())
	if err != nil {
		return fmt.Errorf("connect as %s: %w", QueryRole, err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) // used once: discarded after the query

	// Role: the login is the dedicated role, without a way around RLS.
	var login string
	var super, bypass bool
	var pid int32
	err = conn.QueryRow(ctx, `SELECT session_user, r.rolsuper, r.rolbypassrls, pg_backend_pid()
		FROM pg_roles r WHERE r.rolname = session_user`).Scan(&login, &super, &bypass, &pid)
	if err != nil {
		return err
	}
	if login != QueryRole || super || bypass {
		return &RoleError{Login: login}
	}
	started, err := db.New().QuerySessionBind(ctx, q.cfg.Store, &db.QuerySessionBindParams{Pid: pid, TenantID: tenant})
	if err != nil {
		return fmt.Errorf("bind the query session: %w", err)
	}
	defer func() {
		_ = db.New().QuerySessionUnbind(context.WithoutCancel(ctx), q.cfg.Store, &db.QuerySessionUnbindParams{Pid: pid, BackendStart: started})
	}()

	// Transaction: read only, its snapshot taken by a trusted statement
	// before any agent SQL, so nothing can make it read-write.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // never committed
	var readOnly string
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&readOnly); err != nil {
		return err
	}
	if readOnly != "on" {
		return errors.New("the query transaction is not read-only")
	}

	// Limits, search path, and the role agent SQL runs as; then check that
	// role has none of the login's privileges (so it can signal no query
	// backend) and no way around RLS.
	if _, err := tx.Exec(ctx, q.setup); err != nil {
		return err
	}
	var role string
	var loginPrivileges bool
	err = tx.QueryRow(ctx, `SELECT current_user, r.rolsuper, r.rolbypassrls, pg_has_role(current_user, session_user, 'USAGE')
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&role, &super, &bypass, &loginPrivileges)
	if err != nil {
		return err
	}
	if role != AgentRole || super || bypass || loginPrivileges {
		return &RoleError{Login: login, Role: role}
	}
	return fn(ctx, tx)
}

// read runs the checked statement under the row ceiling and byte cap and
// fills res.
func (q *Querier) read(ctx context.Context, tx pgx.Tx, statement string, res *Result) error {
	wrapped := fmt.Sprintf("SELECT * FROM (\n%s\n) AS orangerail_query LIMIT %d", statement, MaxRows+1)
	// One statement in the extended protocol: never the simple protocol.
	rows, err := tx.Query(ctx, wrapped, pgx.QueryExecModeExec)
	if err != nil {
		return err
	}
	defer rows.Close()
	for _, f := range rows.FieldDescriptions() {
		res.Columns = append(res.Columns, f.Name)
	}
	for rows.Next() {
		if len(res.Rows) == MaxRows {
			res.TruncatedBy = "rows"
			break
		}
		values, err := rows.Values()
		if err != nil {
			return err
		}
		encoded, err := json.Marshal(values)
		if err != nil {
			return err
		}
		if res.Bytes+len(encoded) > MaxBytes {
			res.TruncatedBy = "bytes"
			break
		}
		res.Bytes += len(encoded)
		res.Rows = append(res.Rows, encoded)
	}
	rows.Close()
	return rows.Err()
}
