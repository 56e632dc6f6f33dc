package sqlquery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/testdb"
)

// everyType is one statement of a value of every type the answer encodes
// by its type, its column named by the value's type, and what each
// becomes.
var everyType = []struct{ sql, name, typ, want string }{
	{"'123e4567-e89b-12d3-a456-426614174000'::uuid", "uuid", "uuid", `"123e4567-e89b-12d3-a456-426614174000"`},
	{"'2024-05-01'::date", "date", "date", `"2024-05-01"`},
	{"'infinity'::date", "date_infinity", "date", `"infinity"`},
	{"'2024-05-01 12:00:00.5+02'::timestamptz", "timestamptz", "timestamptz", `"2024-05-01T10:00:00.5+00:00"`},
	{"'-infinity'::timestamptz", "timestamptz_infinity", "timestamptz", `"-infinity"`},
	{"'2024-05-01 12:00'::timestamp", "timestamp", "timestamp", `"2024-05-01T12:00:00"`},
	{"'12:00:01.25'::time", "time", "time", `"12:00:01.25"`},
	{"'12:00+02'::timetz", "timetz", "timetz", `"12:00:00+02"`},
	{"'1 year 2 mons 3 days 04:05:06.5'::interval", "interval", "interval", `"P1Y2M3DT4H5M6.5S"`},
	{"'-1 year -2 mons +3 days -04:05:06.5'::interval", "interval_negative", "interval", `"P-1Y-2M3DT-4H-5M-6.5S"`},
	{"'0'::interval", "interval_zero", "interval", `"PT0S"`},
	{"12.340::numeric", "numeric", "numeric", `"12.340"`},
	{"-0.5::numeric(4, 2)", "decimal", "numeric", `"-0.50"`},
	{"'NaN'::numeric", "numeric_nan", "numeric", `"NaN"`},
	{"'-Infinity'::numeric", "numeric_infinity", "numeric", `"-Infinity"`},
	{"1e30::numeric", "numeric_big", "numeric", `"1000000000000000000000000000000"`},
	{"3::int8", "int8", "int8", `3`},
	{"9007199254740992::int8", "int8_2_53", "int8", `9007199254740992`},
	{"9007199254740993::int8", "int8_past_2_53", "int8", `"9007199254740993"`},
	{"(-9223372036854775807 - 1)::int8", "int8_min", "int8", `"-9223372036854775808"`},
	{"'\\xDEADbeef00'::bytea", "bytea", "bytea", `"deadbeef00"`},
	{"''::bytea", "bytea_empty", "bytea", `""`},
	{`'{"a": [1, 2.50], "b": null}'::jsonb`, "jsonb", "jsonb", `{"a":[1,2.50],"b":null}`},
	{`'[1, "x"]'::json`, "json", "json", `[1,"x"]`},
	{"ARRAY[1, 2]", "int4_array", "int4[]", `[1,2]`},
	{"ARRAY[[1, 2], [3, NULL]]::int8[]", "int8_array", "int8[]", `[[1,2],[3,null]]`},
	{"ARRAY[9007199254740993]::int8[]", "int8_array_big", "int8[]", `["9007199254740993"]`},
	{"ARRAY[1.50, 'NaN', NULL]::numeric[]", "numeric_array", "numeric[]", `["1.50","NaN",null]`},
	{"ARRAY['\\x0A'::bytea, NULL]", "bytea_array", "bytea[]", `["0a",null]`},
	{"ARRAY['2024-05-01'::date]", "date_array", "date[]", `["2024-05-01"]`},
	{"ARRAY['2024-05-01 12:00+02'::timestamptz]", "timestamptz_array", "timestamptz[]", `["2024-05-01T10:00:00+00:00"]`},
	{"ARRAY['-1 day 02:00'::interval]", "interval_array", "interval[]", `["P-1DT2H"]`},
	{"ARRAY['123e4567-e89b-12d3-a456-426614174000'::uuid]", "uuid_array", "uuid[]", `["123e4567-e89b-12d3-a456-426614174000"]`},
	{`ARRAY['{"a": 1}'::jsonb]`, "jsonb_array", "jsonb[]", `[{"a":1}]`},
	{"ARRAY['happy', 'sad']::mood[]", "enum_array", "mood[]", `["happy","sad"]`},
	{"ARRAY[ROW(1, 'x')::pair]", "composite_array", "pair[]", `["(1,x)"]`},
	{"'{}'::text[]", "empty_array", "text[]", `[]`},
	{"'10.0.0.1/8'::inet", "inet", "inet", `"10.0.0.1/8"`},
	{"'10.0.0.0/8'::cidr", "cidr", "cidr", `"10.0.0.0/8"`},
	{"'08:00:2B:01:02:03'::macaddr", "macaddr", "macaddr", `"08:00:2b:01:02:03"`},
	{"'happy'::mood", "enum", "mood", `"happy"`},
	{"7::big", "domain", "int8", `7`},
	{"true", "bool", "bool", `true`},
	{"NULL::uuid", "null", "uuid", `null`},
	{"'(1,2)'::point", "point", "point", `"(1,2)"`},
	{"'[1,5)'::int4range", "range", "int4range", `"[1,5)"`},
	{"ROW(1, 'x')::pair", "composite", "pair", `"(1,x)"`},
}

// TestValuesAreEncodedByType: each value comes back as its column's
// Postgres type says, whatever the server's or the login's output styles,
// and each column's name and type come back beside the rows.
func TestValuesAreEncodedByType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Output styles an operator might configure: the answer does not change.
	var database string
	if err := b.admin.QueryRow(ctx, "SELECT current_database()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	for _, setting := range []string{"DateStyle = 'SQL, DMY'", "TimeZone = 'Asia/Kolkata'", "IntervalStyle = 'postgres_verbose'", "bytea_output = 'escape'", "extra_float_digits = -3"} {
		if _, err := b.admin.Exec(ctx, fmt.Sprintf("ALTER ROLE %s IN DATABASE %q SET %s", sqlquery.QueryRole, database, setting)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.admin.Exec(ctx, `CREATE TYPE orangerail.mood AS ENUM ('happy', 'sad');
		CREATE DOMAIN orangerail.big AS int8;
		CREATE TYPE orangerail.pair AS (a int, b text)`)
	if err != nil {
		t.Fatal(err)
	}
	values := make([]string, len(everyType))
	var want, wantColumns []string
	for i, v := range everyType {
		values[i] = v.sql + " AS " + v.name
		want = append(want, v.want)
		wantColumns = append(wantColumns, fmt.Sprintf("{%s %s}", v.name, v.typ))
	}
	res, err := b.q.Query(ctx, "acme", "SELECT "+strings.Join(values, ", ")+", 1.5::float8 AS float8")
	if err != nil {
		t.Fatal(err)
	}
	want, wantColumns = append(want, "1.5"), append(wantColumns, "{float8 float8}")
	var got []json.RawMessage
	if err := json.Unmarshal(res.Rows[0], &got); err != nil || len(got) != len(want) {
		t.Fatalf("%s: %v", res.Rows[0], err)
	}
	for i, raw := range got {
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		if compact.String() != want[i] {
			t.Errorf("%s: got %s, want %s", values[min(i, len(values)-1)], compact.String(), want[i])
		}
	}
	if fmt.Sprint(res.Columns) != "["+strings.Join(wantColumns, " ")+"]" {
		t.Errorf("columns:\n got %v\nwant %v", res.Columns, wantColumns)
	}
	if len(res.CutValues) != 0 {
		t.Errorf("cut: %v", res.CutValues)
	}
	// The pinned styles hold for the statement too, so what it computes
	// from a value's text agrees with the value.
	res, err = b.q.Query(ctx, "acme", "SELECT '2024-05-01 12:00+02'::timestamptz::text, '1 day'::interval::text, now()::text LIKE '%+00'")
	if err != nil || string(res.Rows[0]) != `["2024-05-01 10:00:00+00","P1D",true]` {
		t.Fatalf("styles in the statement: %s %v", res.Rows, err)
	}
}

// TestBytesAreCutAsHex: a long bytea is cut in the database, after the
// bytes its share of hex needs, and comes back as that much hex.
func TestBytesAreCutAsHex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.q.Query(context.Background(), "acme", "SELECT pg_catalog.decode(repeat('ab', 10000000), 'hex') AS big, '\\x01'::bytea AS small")
	if err != nil {
		t.Fatal(err)
	}
	share := sqlquery.RowChars / 2
	if want := `["` + strings.Repeat("ab", share/2) + `","01"]`; string(res.Rows[0]) != want || fmt.Sprint(res.CutValues) != "[{0 0}]" || res.CutChars != share {
		t.Fatalf("cut %v to %d: %.80s", res.CutValues, res.CutChars, res.Rows[0])
	}
}

// TestTablesTheQueryRoleMayRead: the catalog read at New lists, in the
// configured schemas, the relations and the columns the role agent SQL
// runs as may read, and nothing it may not.
func TestTablesTheQueryRoleMayRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.admin.Exec(ctx, `CREATE DOMAIN orangerail.big AS int8;
		CREATE TABLE orangerail.partly (open orangerail.big, secret text, later_dropped text);
		ALTER TABLE orangerail.partly DROP COLUMN later_dropped;
		GRANT SELECT (open) ON orangerail.partly TO orangerail_readonly;
		CREATE TABLE orangerail.closed (x int);
		CREATE SCHEMA other; CREATE TABLE other.elsewhere (x int); GRANT USAGE ON SCHEMA other TO orangerail_readonly;
		GRANT SELECT ON other.elsewhere TO orangerail_readonly`)
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: testdb.WithUser(t, b.url, sqlquery.QueryRole, ""), Store: b.runtime})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, table := range q.Tables() {
		if table.Schema != "orangerail" {
			t.Errorf("%s.%s is outside the schemas", table.Schema, table.Name)
		}
		found[table.Name] = fmt.Sprint(table.Columns)
	}
	if found["partly"] != "[{open int8}]" || found["closed"] != "" || found["tenants"] != "" {
		t.Errorf("partly %q, closed %q, tenants %q", found["partly"], found["closed"], found["tenants"])
	}
	if !strings.HasPrefix(found["audit"], "[{tenant_id text} {seq int8}") || !strings.Contains(found["audit"], "{entry bytea}") {
		t.Errorf("audit: %s", found["audit"])
	}
	if found["audit_heads"] == "" {
		t.Errorf("the view audit_heads is not listed: %v", found)
	}
	// A second schema is listed after the first.
	q, err = sqlquery.New(ctx, sqlquery.Config{URL: testdb.WithUser(t, b.url, sqlquery.QueryRole, ""), Store: b.runtime, Schemas: []string{"other", "orangerail"}})
	if err != nil {
		t.Fatal(err)
	}
	if tables := q.Tables(); len(tables) < 2 || tables[0].Schema != "other" || tables[0].Name != "elsewhere" || tables[1].Schema != "orangerail" {
		t.Errorf("two schemas: %v", tables)
	}
	// A login that is not the query role fails at New, not at a query.
	if _, err := sqlquery.New(ctx, sqlquery.Config{URL: b.url, Store: b.runtime}); err == nil || !strings.Contains(err.Error(), "not a plain orangerail_query") {
		t.Errorf("New as the admin: %v", err)
	}
}

// TestSealedInputsAreNoReadersColumns: the query role and the auditors
// read every column of their tenants' approvals but a sealed input's
// ciphertext and wrapped data key: a copy of the two taken before the
// approval's retention shredded the key would open after it for whoever
// holds the ring. A statement naming either is refused; one naming the
// rest reads the row.
func TestSealedInputsAreNoReadersColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, input_key_id,
			input_sealed, input_data_key, definition_hash, expires_at)
		VALUES (gen_random_uuid(), 'acme', 'cancel_order', 'agent-7', NULL, sha256('d'), NULL, '\x0102'::bytea, '\x0304'::bytea, sha256('h'), now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SELECT input_data_key FROM approvals", "SELECT input_sealed FROM approvals", "SELECT * FROM approvals",
		"SELECT a FROM approvals a", "SELECT to_jsonb(a) FROM approvals a"} {
		res, err := b.q.Query(ctx, "acme", sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.InsufficientPrivilege {
			t.Errorf("%s: %v %v, want permission denied", sql, res, err)
		}
	}
	res, err := b.q.Query(ctx, "acme", "SELECT status, input_key_id, input_shredded_at, encode(input_digest, 'hex') <> '' FROM approvals")
	if err != nil || len(res.Rows) != 1 || string(res.Rows[0]) != `["pending",null,null,true]` {
		t.Errorf("the readable columns: %v, %v", res, err)
	}
	for _, col := range b.q.Tables() {
		if col.Name == "approvals" && (strings.Contains(fmt.Sprint(col.Columns), "input_sealed") || strings.Contains(fmt.Sprint(col.Columns), "input_data_key")) {
			t.Errorf("the tool lists approvals as %v", col.Columns)
		}
	}
	// Both readers read every other column, those a later migration adds
	// too (a column grant covers only the columns it names).
	for _, role := range []string{"orangerail_auditor", "orangerail_readonly"} {
		var unread []string
		rows, err := b.admin.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = 'orangerail.approvals'::regclass AND attnum > 0 AND NOT attisdropped
			AND NOT has_column_privilege($1, attrelid, attnum, 'SELECT') ORDER BY attnum`, role)
		if err == nil {
			unread, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil || !slices.Equal(unread, []string{"input_sealed", "input_data_key"}) {
			t.Errorf("%s may not read %v of approvals (%v), want only input_sealed and input_data_key", role, unread, err)
		}
	}
}
