package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// jsonbCases are JSON texts at the edges of what Postgres reads as jsonb:
// its grammar, its escapes, and the numbers its numeric holds.
func jsonbCases() []string {
	cases := []string{
		`{}`, `[]`, ` [ 1 , 2 ] `, "[1]\n", "\t{\"a\":\r\n1}", `{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":1}x`, `1 2`, ``, ` `,
		`true`, `false`, `null`, `tru`, `nul`, `truex`, `[true,false,null]`, "\f1", `{"a":{"b":[{"c":null}]}}`, `{1:2}`,
		`"\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\uDBFF\uDFFF"`, `"\ud800\u0041"`, `"\ud800x"`, `"\ud800\ud800"`,
		"\"a\tb\"", "\"a\x7fb\"", "\"a\x1fb\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"\u00e9"`, `"é"`, `"\/\b\f\n\r\t\"\\"`, `"abc`, `"\"`,
		`01`, `-`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-0`, `-0.0e-0`, `1E+00005`, `0e-1`,
	}
	for _, i := range []string{"0", "1", "12", "10", "-3"} {
		for _, f := range []string{"", ".0", ".5", ".05", ".000"} {
			for _, e := range []string{"", "e0", "e-0", "E+5", "e16382", "e-16382", "e-16383", "e-16384", "e131070", "e131071",
				"e131072", "e131073", "e536870912", "e1073741822", "e1073741823", "e-1073741822", "e-1073741823", "e99999999999"} {
				cases = append(cases, i+f+e)
			}
		}
	}
	return cases
}

// TestValidJSONBAgreesWithPostgres: validJSONB accepts exactly the texts
// Postgres reads as jsonb.
func TestValidJSONBAgreesWithPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	accepted := 0
	for _, text := range jsonbCases() {
		pgErr := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var ok bool
			return tx.QueryRow(ctx, "SELECT convert_from($1, 'UTF8')::jsonb IS NOT NULL", []byte(text)).Scan(&ok)
		})
		if got := validJSONB([]byte(text)); got != (pgErr == nil) {
			t.Errorf("validJSONB(%q) = %v; Postgres: %v", text, got, pgErr)
		}
		if pgErr == nil {
			accepted++
		}
	}
	// Both sides of the line are covered.
	if accepted < 100 || accepted > len(jsonbCases())-100 {
		t.Fatalf("Postgres accepted %d of %d cases", accepted, len(jsonbCases()))
	}
}

// FuzzValidJSONB holds validJSONB to never panicking and never accepting
// what is not JSON.
func FuzzValidJSONB(f *testing.F) {
	for _, c := range jsonbCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if validJSONB(b) && !json.Valid(b) {
			t.Fatalf("accepted what is not JSON: %q", b)
		}
	})
}
