package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
)

// sqlSession serves the example with sql_query for auditors, the catalog
// holding the types the answers are tested with, and returns an auditor's
// session and sql_query as it lists it.
func sqlSession(t *testing.T) (*sdk.ClientSession, *sdk.Tool) {
	t.Helper()
	b := setup(t)
	ctx := context.Background()
	_, err := b.admin.Exec(ctx, `CREATE TYPE orangerail.mood AS ENUM ('happy', 'sad');
		CREATE TABLE orangerail.readable (id int8, note text, hidden text);
		GRANT SELECT (id, note) ON orangerail.readable TO orangerail_readonly;
		CREATE TABLE orangerail.unreadable (x int)`)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.sqlServer(t, mcp.Options{})
	cs := connect(t, s, agent("auditor"))
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(listed.Tools, func(tool *sdk.Tool) bool { return tool.Name == "sql_query" })
	if i < 0 {
		t.Fatal("an auditor does not see sql_query")
	}
	return cs, listed.Tools[i]
}

// compileOutputSchema compiles the output schema tool advertises.
func compileOutputSchema(t *testing.T, tool *sdk.Tool) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(tool.OutputSchema)
	if err != nil || tool.OutputSchema == nil {
		t.Fatalf("%s advertises no output schema: %v", tool.Name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("output.json")
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

// sqlTypes is a statement of a value of every type sql_query encodes by
// its type; the golden file holds what each becomes.
const sqlTypes = `SELECT '123e4567-e89b-12d3-a456-426614174000'::uuid AS uuid, '2024-05-01'::date AS date,
	'2024-05-01 12:00:00.5+02'::timestamptz AS timestamptz, '2024-05-01 12:00'::timestamp AS timestamp,
	'12:00:01.25'::time AS time, '12:00+02'::timetz AS timetz,
	'1 year 2 mons 3 days 04:05:06.5'::interval AS interval, '-1 year -2 mons +3 days -04:05:06.5'::interval AS interval_negative,
	12.340::numeric AS numeric, -0.5::numeric(4, 2) AS decimal, 'NaN'::numeric AS numeric_nan, 'Infinity'::numeric AS numeric_infinity,
	3::int8 AS int8, 9007199254740993::int8 AS int8_past_2_53, 7::int4 AS int4, 1.5::float8 AS float8, 'NaN'::float8 AS float8_nan,
	sha256('abc') AS bytea, '{"a": [1, 2.50], "b": null}'::jsonb AS jsonb, '[1, "x"]'::json AS json,
	ARRAY[[1, 2], [3, NULL]]::int8[] AS int8_array, ARRAY[1.50, 'NaN']::numeric[] AS numeric_array, ARRAY['\x0a'::bytea] AS bytea_array,
	ARRAY['-1 day 02:00'::interval] AS interval_array, ARRAY['2024-05-01'::date] AS date_array, ARRAY['happy', 'sad']::mood[] AS enum_array,
	'10.0.0.1/8'::inet AS inet, '10.0.0.0/8'::cidr AS cidr, '08:00:2b:01:02:03'::macaddr AS macaddr,
	'happy'::mood AS enum, true AS bool, NULL::text AS "null", '(1,2)'::point AS point, 'text' AS text`

// TestSQLQueryAnswersByType: through the go-sdk client, each value comes
// back encoded by its column's Postgres type, beside the columns' names
// and types, and every answer's structured content is valid against the
// output schema sql_query advertises; a refusal carries none.
func TestSQLQueryAnswersByType(t *testing.T) {
	t.Parallel()
	cs, tool := sqlSession(t)
	schema := compileOutputSchema(t, tool)
	answer := func(sql string) (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		res, body := call(t, cs, "sql_query", fmt.Sprintf(`{"sql": %q}`, sql))
		if res.IsError {
			if res.StructuredContent != nil {
				t.Errorf("%s: a refusal carries structured content, which its output schema does not describe", sql)
			}
			return res, body
		}
		raw, _ := json.Marshal(res.StructuredContent)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("%s: the structured content does not match the advertised output schema: %v", sql, err)
		}
		return res, body
	}

	res, body := answer(sqlTypes)
	if res.IsError {
		t.Fatalf("every type: %v", body)
	}
	golden.JSON(t, filepath.Join("testdata", "answers", "sql_query", "types.json"), res)
	row := body["rows"].([]any)[0].([]any)
	columns := body["columns"].([]any)
	values := map[string]any{}
	for i, c := range columns {
		values[c.(map[string]any)["name"].(string)+" "+c.(map[string]any)["type"].(string)] = row[i]
	}
	for column, want := range map[string]any{
		"uuid uuid":                  "123e4567-e89b-12d3-a456-426614174000",
		"date date":                  "2024-05-01",
		"timestamptz timestamptz":    "2024-05-01T10:00:00.5+00:00",
		"interval interval":          "P1Y2M3DT4H5M6.5S",
		"interval_negative interval": "P-1Y-2M3DT-4H-5M-6.5S",
		"numeric numeric":            "12.340",
		"int8_past_2_53 int8":        "9007199254740993",
		"bytea bytea":                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"enum mood":                  "happy",
		"bool bool":                  true,
		"null text":                  nil,
		"int8 int8":                  float64(3),
		"macaddr macaddr":            "08:00:2b:01:02:03",
		"timestamp timestamp":        "2024-05-01T12:00:00",
		"numeric_infinity numeric":   "Infinity",
		"float8_nan float8":          "NaN",
		"time time":                  "12:00:01.25",
		"inet inet":                  "10.0.0.1/8",
		"point point":                "(1,2)",
		"decimal numeric":            "-0.50",
		"numeric_nan numeric":        "NaN",
		"timetz timetz":              "12:00:00+02",
		"int4 int4":                  float64(7),
		"cidr cidr":                  "10.0.0.0/8",
		"float8 float8":              1.5,
		"text text":                  "text",
		"interval_array interval[]":  []any{"P-1DT2H"},
		"bytea_array bytea[]":        []any{"0a"},
		"numeric_array numeric[]":    []any{"1.50", "NaN"},
		"int8_array int8[]":          []any{[]any{float64(1), float64(2)}, []any{float64(3), nil}},
		"date_array date[]":          []any{"2024-05-01"},
		"enum_array mood[]":          []any{"happy", "sad"},
		"jsonb jsonb":                map[string]any{"a": []any{float64(1), 2.5}, "b": nil},
		"json json":                  []any{float64(1), "x"},
	} {
		got, ok := values[column]
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("%s: got %#v, want %#v", column, got, want)
		}
	}

	// The limits' fields are the schema's too: rows and bytes cut short,
	// values cut, and a statement of no columns.
	if _, body := answer("SELECT * FROM generate_series(1, 2000)"); body["truncatedBy"] != "rows" {
		t.Errorf("rows: %v", body["truncatedBy"])
	}
	if _, body := answer("SELECT repeat('x', 100000) FROM generate_series(1, 10)"); body["truncatedBy"] != "bytes" {
		t.Errorf("bytes: %v", body["truncatedBy"])
	}
	if _, body := answer("SELECT repeat('x', 1000000) AS big, 'abc'::bytea AS b"); fmt.Sprint(body["cutValues"]) != "[map[column:0 row:0]]" {
		t.Errorf("cut: %v", body["cutValues"])
	}
	if _, body := answer("SELECT FROM audit"); fmt.Sprint(body["columns"]) != "[]" {
		t.Errorf("no columns: %v", body["columns"])
	}
	// Refusals travel as text: the message, then the body as JSON.
	res, body = answer("SELECT 1; DELETE FROM audit")
	if !res.IsError || body["rule"] != "one_statement" {
		t.Errorf("refused: %v", body)
	}
	golden.JSON(t, filepath.Join("testdata", "answers", "sql_query", "rejected.json"), res)
	res, body = answer(`SELECT * FROM orangerail.tenants`)
	if !res.IsError || body["sqlstate"] != "42501" {
		t.Errorf("failed: %v", body)
	}
	if res, _ = call(t, cs, "sql_query", `{}`); !res.IsError || res.StructuredContent != nil {
		t.Errorf("invalid input: %v", res)
	}
	golden.JSON(t, filepath.Join("testdata", "answers", "sql_query", "invalid_input.json"), res)
}

// TestSQLQueryDescribesWhatItMayRead: sql_query's description lists the
// relations and columns the query role may read in its schemas, read from
// the live catalog, and nothing it may not; its output schema is
// advertised.
func TestSQLQueryDescribesWhatItMayRead(t *testing.T) {
	t.Parallel()
	_, tool := sqlSession(t)
	d := tool.Description
	for _, want := range []string{
		"(schemas: orangerail, the only relations it may read;",
		"orangerail.audit(tenant_id text, seq int8, ",
		"orangerail.readable(id int8, note text)",
		"orangerail.audit_heads(",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("the description lacks %q:\n%s", want, d)
		}
	}
	// Names and types only: no relation it may not read, no row, no count.
	for _, unwanted := range []string{"hidden", "unreadable", "orangerail.tenants(", "query_sessions(", "acme", "globex", "o-1001"} {
		if strings.Contains(d, unwanted) {
			t.Errorf("the description names %q, which the query role may not read:\n%s", unwanted, d)
		}
	}
	if tool.OutputSchema == nil {
		t.Error("sql_query advertises no output schema")
	}
}
