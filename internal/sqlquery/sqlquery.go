// Package sqlquery runs an agent's read-only SQL in five layers, each of
// which must engage for the query to run: a dedicated low-privilege login
// on a connection used once, the statement run as a role without even that
// login's privileges (role), a read-only transaction whose snapshot
// a trusted statement takes first (transaction), the real Postgres grammar
// (parse, package sqlguard), every function and operator it calls resolved
// against the live catalog (catalog, catalog.go), and server-side limits on
// time, rows and bytes (limits).
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
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/store"
)

// The layers, as Result.Guards names them.
const (
	GuardRole        = "role"
	GuardTransaction = "transaction"
	GuardParse       = "parse"
	GuardLimits      = "limits"
)

// Limits of one query.
//
// Memory is bounded before a row is built, at every layer: Postgres cuts
// each long value to its share of RowChars characters (an outer projection
// of left(value::text, share+1), so a huge value never leaves the
// database); the connection refuses any one message — a row, or an error
// quoting a huge value — longer than MaxMessageBytes before reading its
// body (pgproto3's maximum body length); the answer keeps at most MaxBytes
// of encoded rows; and at most MaxConcurrent queries run at once in a
// process. A query so holds at most about MaxBytes plus a few times
// MaxMessageBytes (the read buffer, the row's values, its encoding), and a
// process running one Querier (serve runs one) at most MaxConcurrent times
// that: MaxHeldBytes. In the database, work_mem and temp_file_limit bound a
// query's sorts, hashes and spills, and statement_timeout its time.
const (
	Timeout  = 5 * time.Second
	MaxRows  = 1000
	MaxBytes = 256 << 10
	// RowChars bounds the characters of one row's long values together:
	// each column whose text may be long (text, numeric, json, arrays, any
	// other type) may hold RowChars / such columns, its share, and a value
	// longer is cut to its share and listed in Result.CutValues. Half of
	// MaxBytes, so that a row of one cut value still fits the answer.
	RowChars = MaxBytes / 2
	// MaxMessageBytes bounds one protocol message from Postgres on a query's
	// connection. The widest row the projection lets through — 1,664
	// columns (Postgres's most), every value its share of four-byte
	// characters — is about 0.6 MiB; a longer message ends the query with a
	// *TooLargeError, its body never read.
	MaxMessageBytes = 1 << 20
)

// MaxConcurrent bounds the queries one Querier runs at once, for all
// tenants; more wait.
const MaxConcurrent = 4

// MaxPerTenant bounds the queries one Querier runs at once for one tenant,
// so that no tenant can hold every slot: another tenant's query waits at
// most for a slot another tenant frees, never behind all of one tenant's.
const MaxPerTenant = 2

// MaxHeldBytes is about the most memory a Querier's answers hold at once:
// MaxConcurrent queries, each with its answer, a message buffer, a row's
// values and their encoding. The bench's sql_query_hostile_rss measures
// what a process really takes.
const MaxHeldBytes = MaxConcurrent * (MaxBytes + 3*MaxMessageBytes)

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
	// Columns name each column of the rows, and its Postgres type.
	Columns []Column `json:"columns"`
	// Rows are each row's values as a JSON array, encoded once: the byte
	// cap counts these bytes, and they are what the caller sends on.
	Rows []json.RawMessage `json:"rows"`
	// Guards are the layers that engaged for this query.
	Guards []string `json:"guards"`
	// TruncatedBy is "rows" or "bytes" when the answer was cut short.
	TruncatedBy string `json:"truncatedBy,omitempty"`
	// CutValues are the values cut to their first CutChars characters, by
	// row and column: such a value is a JSON string of those characters,
	// whatever the column's type (a cut number or JSON document is no
	// longer one).
	CutValues []CutValue `json:"cutValues,omitempty"`
	CutChars  int        `json:"cutChars,omitempty"`
	// Bytes counts the encoded rows and CutValues entries, at most MaxBytes.
	Bytes int `json:"bytes"`
}

// Column is one column of an answer, or of a relation a query may read:
// its name and its Postgres type's name (pg_type's typname, an array's
// written as its element's with "[]": "int8", "timestamptz", "text[]",
// an enum's own name).
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// CutValue names a value that was cut: Rows[Row][Column].
type CutValue struct {
	Row    int `json:"row"`
	Column int `json:"column"`
}

// TooLargeError says one message from Postgres — a row, or an error
// quoting a long value — exceeded MaxMessageBytes: the query was ended
// before its body was read.
type TooLargeError struct{ Bytes int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a message of %d bytes from the database exceeds the query's limit of %d: the query was ended", e.Bytes, MaxMessageBytes)
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
	cfg    Config
	conn   *pgx.ConnConfig
	slots  *slots
	setup  string  // the statements that set a query's limits, styles, search path and role
	tables []Table // what a query may read, as the catalog said at New
}

// New returns a Querier, having read from the live catalog, as the role
// agent SQL runs as, the relations and columns a query may read (Tables):
// a query login that cannot log in, or is not the dedicated role, fails
// here rather than at an agent's first query.
func New(ctx context.Context, c Config) (*Querier, error) {
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
	// reverts with the transaction, which is never committed. work_mem is
	// set here too, so it holds where the migration could not set the
	// login's default; temp_file_limit only a superuser may set, so it is
	// the login's default alone (migration 00004). The output styles are
	// pinned, whatever the server's or the role's defaults, because the
	// answer's values are their text (answer.go): timestamps in UTC, dates
	// ISO (the day/month order for input is left as configured), intervals
	// ISO 8601, bytea hex, floats exact.
	setup := strings.Join([]string{
		fmt.Sprintf("SET LOCAL statement_timeout = %d", Timeout.Milliseconds()),
		fmt.Sprintf("SET LOCAL work_mem = '%s'", WorkMem),
		"SET LOCAL TimeZone = 'UTC'",
		"SET LOCAL DateStyle = 'ISO'",
		"SET LOCAL IntervalStyle = 'iso_8601'",
		"SET LOCAL bytea_output = 'hex'",
		"SET LOCAL extra_float_digits = 1",
		// The parse and catalog layers lex the statement as pg_query
		// does, with standard_conforming_strings on; where the server, the
		// database or the role turned it off, 'x\', ' would be a string to
		// Postgres and code to the guard, or the reverse. Pinned here, it
		// holds for the statement, which comes in a later message.
		"SET LOCAL standard_conforming_strings = on",
		"SET LOCAL search_path TO " + strings.Join(schemas, ", "),
		"SET LOCAL ROLE " + pgx.Identifier{AgentRole}.Sanitize(),
	}, "; ")
	// pgx reads a message's length before its body and refuses one longer
	// than this, so a huge row or error is never buffered.
	pc.ConnConfig.MaxProtocolMessageBodyLen = MaxMessageBytes
	q := &Querier{cfg: c, conn: pc.ConnConfig, slots: newSlots(), setup: setup}
	if q.tables, err = q.readTables(ctx); err != nil {
		return nil, fmt.Errorf("sqlquery: read the relations %s may read: %w", AgentRole, err)
	}
	return q, nil
}

// Schemas returns the search path a query sees.
func (q *Querier) Schemas() []string { return slices.Clone(q.cfg.Schemas) }

// Tables returns the relations (tables, views, materialized views, foreign
// tables) in the schemas a query may read, each with the columns it may
// read, in the schemas' order and then by name: the catalog as the role
// agent SQL runs as saw it at New. Names and types only: nothing of any
// tenant's rows, not even their number.
func (q *Querier) Tables() []Table { return slices.Clone(q.tables) }

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

// Query runs one agent statement for a tenant. A statement the parse or
// catalog layer refuses returns a *sqlguard.Refusal; a statement Postgres refuses returns
// its error (for the operator's log, never for the agent).
func (q *Querier) Query(ctx context.Context, tenant, sql string) (*Result, error) {
	if err := database.ValidateTenantID(tenant); err != nil {
		return nil, err
	}
	statement, err := sqlguard.Check(sql, q.cfg.Schemas)
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: []Column{}, Rows: []json.RawMessage{}}
	err = q.session(ctx, tenant, func(ctx context.Context, tx pgx.Tx) error {
		// Catalog: every call resolved, before the statement runs.
		if err := q.resolve(ctx, tx, statement); err != nil {
			return err
		}
		// Every layer engaged, or session would not have called.
		res.Guards = []string{GuardRole, GuardTransaction, GuardParse, GuardCatalog, GuardLimits}
		return read(ctx, tx, statement, res)
	})
	var tooLarge *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooLarge) {
		return nil, &TooLargeError{Bytes: tooLarge.ActualBodyLen}
	}
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
	// many it may hold, so a burst cannot use up the server's connections,
	// and how many one tenant may hold, so it cannot starve the others.
	release, err := q.slots.acquire(ctx, tenant)
	if err != nil {
		return err
	}
	defer release()
	conn, pid, err := q.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx)) // used once: discarded after the query
	st := store.New(q.cfg.Store)
	started, err := st.QuerySessionBind(ctx, &store.QuerySessionBindParams{PID: pid, TenantID: tenant})
	if errors.Is(store.InterpretError(err), store.ErrBackendBound) {
		return &BackendError{Bound: pid, Shared: true}
	}
	if err != nil {
		return fmt.Errorf("bind the query session: %w", err)
	}
	defer func() {
		_ = st.QuerySessionUnbind(context.WithoutCancel(ctx), &store.QuerySessionUnbindParams{PID: pid, BackendStart: started})
	}()
	return q.inTx(ctx, conn, pid, fn)
}

// connect opens a query connection and checks the role layer's login: the
// dedicated role, without a way around RLS. The caller closes it.
func (q *Querier) connect(ctx context.Context) (*pgx.Conn, int32, error) {
	conn, err := pgx.ConnectConfig(ctx, q.conn.Copy())
	if err != nil {
		return nil, 0, fmt.Errorf("connect as %s: %w", QueryRole, err)
	}
	var login string
	var super, bypass bool
	var pid int32
	err = conn.QueryRow(ctx, `SELECT session_user, r.rolsuper, r.rolbypassrls, pg_backend_pid()
		FROM pg_roles r WHERE r.rolname = session_user`).Scan(&login, &super, &bypass, &pid)
	if err == nil && (login != QueryRole || super || bypass) {
		err = &RoleError{Login: login}
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx)) // a failed check: nothing was read
		return nil, 0, err
	}
	return conn, pid, nil
}

// inTx runs fn in a transaction of conn with the transaction and limits
// layers engaged, as AgentRole. bound, when not 0, is the backend the
// session bound to its tenant: the transaction must run on it.
func (q *Querier) inTx(ctx context.Context, conn *pgx.Conn, bound int32, fn func(ctx context.Context, tx pgx.Tx) error) error {
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

	// Limits, styles, search path, and the role agent SQL runs as; then
	// check that role has none of the login's privileges (so it can signal
	// no query backend) and no way around RLS.
	if _, err := tx.Exec(ctx, q.setup); err != nil {
		return err
	}
	var login, role string
	var super, bypass, loginPrivileges bool
	var backend int32
	err = tx.QueryRow(ctx, `SELECT session_user, current_user, r.rolsuper, r.rolbypassrls, pg_has_role(current_user, session_user, 'USAGE'), pg_backend_pid()
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&login, &role, &super, &bypass, &loginPrivileges, &backend)
	if err != nil {
		return err
	}
	if role != AgentRole || super || bypass || loginPrivileges {
		return &RoleError{Login: login, Role: role}
	}
	// The tenant is bound to a backend, not to this connection: where a
	// pooler that pools by transaction stands between, this transaction
	// may run on another backend — one bound to another tenant's query,
	// whose rows Row Level Security would then show it.
	if bound != 0 && backend != bound {
		return &BackendError{Bound: bound, Ran: backend}
	}
	return fn(ctx, tx)
}

// BackendError says a query's backend served another query too: the one
// its connection reached was bound to another query already (Shared), or
// its transaction ran on another backend than the one it bound (Ran). The
// query login's URL leads through a pooler that pools by transaction
// (PgBouncer's transaction mode), where sql_query needs a direct or
// session-pooled connection. Nothing of the agent's SQL ran.
type BackendError struct {
	Bound  int32
	Ran    int32 // 0 when Shared
	Shared bool
}

func (e *BackendError) Error() string {
	const fix = "the query login's connection is pooled by transaction; give sql_query a direct or session-pooled connection (sql_query.url_env): refusing to run agent SQL"
	if e.Shared {
		return fmt.Sprintf("the query's backend %d is bound to another query already: %s", e.Bound, fix)
	}
	return fmt.Sprintf("the query ran on backend %d, not on %d, the one bound to its tenant: %s", e.Ran, e.Bound, fix)
}

// read runs the checked statement under the limits and fills res: it
// describes the statement, has Postgres cut each long value (see answer.go),
// and reads the rows as text, encoding each row once.
func read(ctx context.Context, tx pgx.Tx, statement string, res *Result) error {
	// The unnamed statement: described, not executed, and not kept.
	described, err := tx.Conn().PgConn().Prepare(ctx, "", statement, nil)
	if err != nil {
		return err
	}
	oids := make([]uint32, len(described.Fields))
	for i, f := range described.Fields {
		oids[i] = f.DataTypeOID
	}
	types, err := readTypes(ctx, tx, oids)
	if err != nil {
		return err
	}
	a := newAnswer(described.Fields, types)
	for _, f := range described.Fields {
		res.Columns = append(res.Columns, Column{Name: f.Name, Type: types[f.DataTypeOID].typeName()})
	}
	// One statement in the extended protocol: never the simple protocol.
	rows, err := tx.Query(ctx, a.statement(statement, MaxRows+1), pgx.QueryExecModeExec)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if len(res.Rows) == MaxRows {
			res.TruncatedBy = "rows"
			break
		}
		encoded, cut := a.encode(rows.RawValues())
		cost := len(encoded)
		for _, column := range cut {
			cost += cutValueBytes(len(res.Rows), column)
		}
		if res.Bytes+cost > MaxBytes {
			res.TruncatedBy = "bytes"
			break
		}
		for _, column := range cut {
			res.CutValues = append(res.CutValues, CutValue{Row: len(res.Rows), Column: column})
			res.CutChars = a.share
		}
		res.Bytes += cost
		res.Rows = append(res.Rows, encoded)
	}
	if res.TruncatedBy != "" {
		// A limit was reached: have Postgres stop the statement rather than
		// compute and send the rest, and read what it sent meanwhile, so
		// the backend is idle before the slot is freed. The statement's
		// end (57014, or done first) is not the agent's error.
		_ = tx.Conn().PgConn().CancelRequest(ctx)
		rows.Close()
		return nil
	}
	rows.Close()
	return rows.Err()
}
