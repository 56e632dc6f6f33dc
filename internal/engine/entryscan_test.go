package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// entryCases are entries an attacker with the runtime's rights could try to
// append, or a tamperer could write. Go's scanEntry and SQL's
// audit_entry_columns must accept the same ones and read the same columns.
// acceptedCases is how many entryCases are well-formed.
const acceptedCases = 11

var entryCases = []string{
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"v":1.0,"tenant":"acme","at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","phase":"staged","actor":{"kind":"human","subject":"a"},"dev_mode":true}`,
	`{"v":1e0,"tenant":"acme","at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","phase":"staged","actor":{"kind":"human","subject":"a"},"dev_mode":true}`,
	` { "v" : 1 , "t\u0065nant" : "acme" , "at" : "2026-11-29T20:56:15.123456Z" , "correlation_id" : "c\"q\\" , "phase" : "staged" , "actor" : { "kind" : "system" , "subject" : "\u00e9" } , "dev_mode" : false } `,
	`{"action":"cancel_order","approval_id":"6f1d0d2e-0000-4000-8000-000000000001","actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"input":{"a":[1,{"b":"}\""}],"a":2},"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","phase":"approved","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a","kind":"human"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-02-30T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T24:00:00.000000Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-12-31T23:59:60.000000Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":""},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"action":null,"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"approval_id":"6F1D0D2E-0000-4000-8000-000000000001","at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":0,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":"1"}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"stage-d","tenant":"acme","v":1}`,
	`{"actor":"a","at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`[{"v":1}]`,
	// The actor's issuer (kept since decisions name who verified the
	// person): accepted beside entries without one; repeated, refused.
	`{"actor":{"issuer":"https://id.example","kind":"human","subject":"bob"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"approved","tenant":"acme","v":1}`,
	`{"actor":{"issuer":"https://id.example","kind":"human","subject":"bob","issuer":"https://other.example"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"approved","tenant":"acme","v":1}`,
	// An operator's break-glass decision (migrations/00010): accepted; a
	// kind neither side knows, refused.
	`{"actor":{"kind":"operator","subject":"postgres"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"approved","result":{"break_glass_reason":"desk down"},"tenant":"acme","v":1}`,
	`{"actor":{"kind":"root","subject":"postgres"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"approved","tenant":"acme","v":1}`,
	// A member repeated in a payload, no escape anywhere: accepted (only
	// the top level and the actor are held to one of each), though jsonb
	// drops one of them.
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"input":{"a":1,"a":2},"phase":"staged","tenant":"acme","v":1}`,
	// A time of the first century: the columns' change below moves it
	// into the era before, which to_char writes the same digits for.
	`{"actor":{"kind":"agent","subject":"a"},"at":"0044-03-15T12:00:00.000000Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	// A payload at the edges of what jsonb holds: a surrogate pair, the
	// largest and the most precise numbers numeric takes. Accepted.
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"input":{"s":"\ud83d\ude00","n":1e131071,"m":-0.5e-16382},"phase":"staged","tenant":"acme","v":1}`,
	// More members than the scanner holds without allocating (16):
	// accepted; with the tenant repeated past them, refused.
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged",` +
		`"x1":1,"x2":2,"x3":3,"x4":4,"x5":5,"x6":6,"x7":7,"x8":8,"x9":9,"x10":10,"x11":11,"x12":12,"tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme",` +
		`"x1":1,"x2":2,"x3":3,"x4":4,"x5":5,"x6":6,"x7":7,"x8":8,"x9":9,"x10":10,"x11":11,"x12":12,"v":1,"tenant":"acme"}`,
	// What Postgres cannot read as jsonb, or reads otherwise than a
	// lenient scanner would, is refused by both: something after the
	// object, a payload that is not JSON, a version a float64 rounds to 1,
	// the year 0000, a lone surrogate, a raw tab, an escaped NUL, a number
	// numeric cannot hold.
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1} garbage`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","result":nonsense,"tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1.00000000000000000001}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"0000-01-01T00:00:00.000000Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"\ud800"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`,
	"{\"actor\":{\"kind\":\"agent\",\"subject\":\"a\tb\"},\"at\":\"2026-11-29T20:56:15.123456Z\",\"correlation_id\":\"c\",\"dev_mode\":false,\"phase\":\"staged\",\"tenant\":\"acme\",\"v\":1}",
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"input":{"a":"\u0000"},"phase":"staged","tenant":"acme","v":1}`,
	`{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"input":{"n":1e131072},"phase":"staged","tenant":"acme","v":1}`,
}

func TestScanEntryAgreesWithSQL(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	accepted := 0
	for _, entry := range entryCases {
		var tenant, at, corr, phase, subject, kind string
		var action, approval *string
		var devMode bool
		sqlErr := conn.QueryRow(context.Background(), `SELECT c.tenant_id, to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			c.correlation_id, c.phase, c.actor, c.actor_kind, c.dev_mode, c.action, c.approval_id::text
			FROM orangerail.audit_entry_columns($1) c`, []byte(entry)).
			Scan(&tenant, &at, &corr, &phase, &subject, &kind, &devMode, &action, &approval)
		c, goErr := scanEntry([]byte(entry))
		if (sqlErr == nil) != (goErr == nil) {
			t.Errorf("SQL err %v, Go err %v for %s", sqlErr, goErr, entry)
			continue
		}
		if goErr != nil {
			continue
		}
		accepted++
		str := func(b []byte) *string {
			if b == nil {
				return nil
			}
			s := string(b)
			return &s
		}
		same := func(a, b *string) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
		if string(c.tenant) != tenant || c.atTime.Format(atLayout) != at || string(c.correlationID) != corr ||
			string(c.phase) != phase || string(c.subject) != subject || string(c.kind) != kind || c.devMode != devMode ||
			!same(str(c.action), action) || !same(str(c.approvalID), approval) {
			t.Errorf("columns differ for %s:\n SQL %s %s %s %s %s %s %v\n Go  %s %s %s %s %s %s %v",
				entry, tenant, at, corr, phase, subject, kind, devMode,
				c.tenant, c.atTime.Format(atLayout), c.correlationID, c.phase, c.subject, c.kind, c.devMode)
		}
	}
	// The first five cases are well-formed, and the one with an issuer,
	// the operator's, the one with a repeated payload member, the first
	// century's, the one at jsonb's edges and the one of many members;
	// the rest are not.
	if accepted != acceptedCases {
		t.Fatalf("%d entries accepted by both, want %d", accepted, acceptedCases)
	}
}

// FuzzScanEntry holds the scanner to never panicking, never accepting
// what it cannot read back, and reading every entry as the two-pass
// scanner it replaced did (scanEntryBefore, kept below as the oracle):
// the same entries accepted, the same columns read.
func FuzzScanEntry(f *testing.F) {
	for _, e := range entryCases {
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		c, err := scanEntry(entry)
		if err == nil && (len(c.subject) == 0 || len(c.correlationID) == 0 || c.atTime.IsZero()) {
			t.Fatalf("accepted an entry without its columns: %q", entry)
		}
		want, wantErr := scanEntryBefore(entry)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("scanEntry(%q): err %v, the oracle's %v", entry, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(c, want) {
			t.Fatalf("scanEntry(%q) = %+v, the oracle read %+v", entry, c, want)
		}
	})
}

// scanEntryBefore is scanEntry as it was before one walk both validated
// the entry and found its members: validJSONB, then a scanner skipping
// over each member's value. The oracle of FuzzScanEntry.
func scanEntryBefore(entry []byte) (entryColumns, error) {
	var c entryColumns
	if !utf8.Valid(entry) || !validJSONB(entry) {
		return c, errEntry
	}
	s := oracleScanner{b: entry}
	var version []byte
	var actor []byte
	seen := make([][]byte, 0, 16)
	err := s.object(func(key, value []byte) error {
		if slices.ContainsFunc(seen, func(k []byte) bool { return bytes.Equal(k, key) }) {
			return errEntry
		}
		seen = append(seen, key)
		var err error
		switch string(key) {
		case "v":
			version = value
		case "tenant":
			c.tenant, err = jsonString(value)
		case "at":
			c.at, err = jsonString(value)
		case "correlation_id":
			c.correlationID, err = jsonString(value)
		case "phase":
			c.phase, err = jsonString(value)
		case "action":
			c.action, err = jsonString(value)
		case "approval_id":
			c.approvalID, err = jsonString(value)
		case "dev_mode":
			switch string(value) {
			case "true":
				c.devMode = true
			case "false":
			default:
				err = errEntry
			}
		case "actor":
			actor = value
		}
		return err
	})
	if err != nil {
		return c, errEntry
	}
	for _, required := range []string{"tenant", "at", "correlation_id", "phase", "dev_mode"} {
		if !slices.ContainsFunc(seen, func(k []byte) bool { return string(k) == required }) {
			return c, errEntry
		}
	}
	if string(version) != "1" {
		v, ok := new(big.Rat).SetString(string(version))
		if !ok || v.Cmp(big.NewRat(1, 1)) != 0 {
			return c, errEntry
		}
	}
	if actor == nil || actor[0] != '{' {
		return c, errEntry
	}
	var actorKeys [][]byte
	var hasSubject, hasKind bool
	a := oracleScanner{b: actor}
	err = a.object(func(key, value []byte) error {
		if slices.ContainsFunc(actorKeys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			return errEntry
		}
		actorKeys = append(actorKeys, key)
		var err error
		switch string(key) {
		case "subject":
			c.subject, err = jsonString(value)
			hasSubject = true
		case "kind":
			c.kind, err = jsonString(value)
			hasKind = true
		}
		return err
	})
	if err != nil || !hasSubject || !hasKind || len(c.subject) == 0 ||
		!slices.Contains(ActorKinds(), ActorKind(c.kind)) {
		return c, errEntry
	}
	if n := utf8.RuneCount(c.correlationID); n < 1 || n > 128 {
		return c, errEntry
	}
	if c.atTime, err = parseAt(c.at); err != nil || !validPhase(c.phase) || (c.approvalID != nil && !validLowerUUID(c.approvalID)) {
		return c, errEntry
	}
	return c, nil
}

// oracleScanner walks the members of a JSON object for scanEntryBefore.
type oracleScanner struct {
	b   []byte
	pos int
}

func (s *oracleScanner) space() {
	for s.pos < len(s.b) && (s.b[s.pos] == ' ' || s.b[s.pos] == '\t' || s.b[s.pos] == '\n' || s.b[s.pos] == '\r') {
		s.pos++
	}
}

func (s *oracleScanner) object(fn func(key, value []byte) error) error {
	s.space()
	if s.pos >= len(s.b) || s.b[s.pos] != '{' {
		return errEntry
	}
	s.pos++
	for {
		s.space()
		if s.pos >= len(s.b) {
			return errEntry
		}
		if s.b[s.pos] == '}' {
			s.pos++
			return nil
		}
		keyStart := s.pos
		if !s.skipValue() {
			return errEntry
		}
		key, err := jsonString(s.b[keyStart:s.pos])
		if err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.b) || s.b[s.pos] != ':' {
			return errEntry
		}
		s.pos++
		s.space()
		valueStart := s.pos
		if !s.skipValue() || s.pos == valueStart {
			return errEntry
		}
		if err := fn(key, s.b[valueStart:s.pos]); err != nil {
			return err
		}
		s.space()
		switch {
		case s.pos >= len(s.b):
			return errEntry
		case s.b[s.pos] == ',':
			s.pos++
		case s.b[s.pos] != '}':
			return errEntry
		}
	}
}

func (s *oracleScanner) skipValue() bool {
	depth := 0
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case '"':
			end := s.pos + 1
			for {
				i := bytes.IndexByte(s.b[end:], '"')
				if i < 0 {
					return false
				}
				end += i
				backslashes := 0
				for j := end - 1; j > s.pos && s.b[j] == '\\'; j-- {
					backslashes++
				}
				if backslashes%2 == 0 {
					break
				}
				end++
			}
			s.pos = end + 1
		case '{', '[':
			depth++
			s.pos++
			continue
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
			s.pos++
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.pos++
			continue
		default:
			s.pos++
			continue
		}
		if depth == 0 {
			return true
		}
	}
	return depth == 0
}

// TestSQLVerifierMatchesEntryColumns holds orangerail.audit_verify, which
// checks columns against entries with the rules written out inline, to
// audit_columns_match, which reads them with audit_entry_columns: for each
// entry case, as the one row of a chain whose links are sound, with its
// columns as audit_entry_columns reads them and with one changed, the
// verifier reports column_mismatch exactly when audit_columns_match says
// the columns are not the entry's.
func TestSQLVerifierMatchesEntryColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	mismatches := 0
	for _, entry := range entryCases {
		for _, change := range []string{"", "UPDATE orangerail.audit SET phase = 'rejected' WHERE tenant_id = 'acme'",
			"UPDATE orangerail.audit SET at = '0044-03-15 12:00:00+00 BC' WHERE tenant_id = 'acme'"} {
			var want bool
			var problem *string
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				// The columns as audit_entry_columns reads them, or made up
				// for an entry it refuses.
				cols := "(SELECT 'acme'::text AS tenant_id, now() AS at, 'c'::text AS correlation_id, 'staged'::text AS phase, NULL::text AS action, " +
					"'a'::text AS actor, 'agent'::text AS actor_kind, false AS dev_mode, NULL::uuid AS approval_id)"
				if pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
					_, err := sp.Exec(ctx, "SELECT orangerail.audit_entry_columns($1)", []byte(entry))
					return err
				}) == nil {
					cols = "orangerail.audit_entry_columns($1::bytea)"
				}
				stmts := []string{
					"INSERT INTO orangerail.tenants (id) VALUES ('acme')",
					`INSERT INTO orangerail.audit (tenant_id, seq, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id, prev_hash, hash)
					 SELECT 'acme', 1, $1::bytea, c.at, c.correlation_id, c.phase, c.action, c.actor, c.actor_kind, c.dev_mode, c.approval_id,
					        decode(repeat('00', 32), 'hex'), sha256(decode(repeat('00', 32), 'hex') || int8send(1::bigint) || sha256($1::bytea))
					 FROM ` + cols + ` c`,
					"INSERT INTO orangerail.audit_heads (tenant_id, seq, hash) SELECT tenant_id, seq, hash FROM orangerail.audit WHERE tenant_id = 'acme'",
				}
				if change != "" {
					stmts = append(stmts, "ALTER TABLE orangerail.audit DISABLE TRIGGER USER", change)
				}
				for _, s := range stmts {
					args := []any{}
					if strings.Contains(s, "$1") {
						args = append(args, []byte(entry))
					}
					if _, err := tx.Exec(ctx, s, args...); err != nil {
						return fmt.Errorf("%s: %w", s, err)
					}
				}
				if err := tx.QueryRow(ctx, "SELECT orangerail.audit_columns_match(a) FROM orangerail.audit a WHERE tenant_id = 'acme'").Scan(&want); err != nil {
					return err
				}
				err := tx.QueryRow(ctx, "SELECT (SELECT problem FROM orangerail.audit_verify('acme'))").Scan(&problem)
				if err != nil {
					return err
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatalf("%s: %v", entry, err)
			}
			switch {
			case want && problem != nil:
				t.Errorf("audit_verify found %s, but the columns are the entry's: %s (%q)", *problem, entry, change)
			case !want && (problem == nil || *problem != "column_mismatch"):
				t.Errorf("audit_verify found %v, want column_mismatch: %s (%q)", problem, entry, change)
			case !want:
				mismatches++
			}
		}
	}
	// Every invalid entry mismatches, all three ways, and every valid one
	// once its phase or its time changes.
	if want := 3*(len(entryCases)-acceptedCases) + 2*acceptedCases; mismatches != want {
		t.Fatalf("%d mismatches, want %d", mismatches, want)
	}
}

var errRollback = errors.New("roll back")

// TestSQLVerifierAsksTypes: a member that is not a string, beside a column
// that spells its JSON text (a correlation id 7 and a column "7"), is
// refused by audit_entry_columns, so audit_verify must report it. Its
// record check reads members as text and asks their type where a column
// could spell another JSON type; each case fails without its question.
func TestSQLVerifierAsksTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const base = `{"action":"a","actor":{"kind":"agent","subject":"s"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`
	for _, tc := range []struct{ tenant, member, as, column string }{
		{"5", `"tenant":"acme"`, `"tenant":5`, "tenant_id = '5'"},
		{"acme", `"correlation_id":"c"`, `"correlation_id":7`, "correlation_id = '7'"},
		{"acme", `"phase":"staged"`, `"phase":true`, "phase = 'true'"},
		{"acme", `"subject":"s"`, `"subject":1`, "actor = '1'"},
		{"acme", `"action":"a"`, `"action":5`, "action = '5'"},
	} {
		entry := []byte(strings.Replace(base, tc.member, tc.as, 1))
		var match bool
		var problem *string
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, s := range []string{
				"INSERT INTO orangerail.tenants (id) VALUES ($2)",
				`INSERT INTO orangerail.audit (tenant_id, seq, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, prev_hash, hash)
				 SELECT $2, 1, $1, '2026-11-29 20:56:15.123456+00', 'c', 'staged', 'a', 's', 'agent', false,
				        decode(repeat('00', 32), 'hex'), sha256(decode(repeat('00', 32), 'hex') || int8send(1::bigint) || sha256($1))`,
				"INSERT INTO orangerail.audit_heads (tenant_id, seq, hash) SELECT tenant_id, seq, hash FROM orangerail.audit WHERE tenant_id = $2",
				"ALTER TABLE orangerail.audit DISABLE TRIGGER USER",
				"UPDATE orangerail.audit SET " + tc.column + " WHERE tenant_id = $2",
			} {
				var args []any
				switch {
				case strings.Contains(s, "$1"):
					args = []any{entry, tc.tenant}
				case strings.Contains(s, "$2"):
					s, args = strings.ReplaceAll(s, "$2", "$1"), []any{tc.tenant}
				}
				if _, err := tx.Exec(ctx, s, args...); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			if err := tx.QueryRow(ctx, "SELECT orangerail.audit_columns_match(a) FROM orangerail.audit a WHERE tenant_id = $1", tc.tenant).Scan(&match); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT (SELECT problem FROM orangerail.audit_verify($1))", tc.tenant).Scan(&problem); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("%s: %v", entry, err)
		}
		if match {
			t.Fatalf("audit_columns_match accepts %s with %s", entry, tc.column)
		}
		if problem == nil || *problem != "column_mismatch" {
			t.Errorf("audit_verify found %v, want column_mismatch: %s with %s", problem, entry, tc.column)
		}
	}
}

// BenchmarkScanEntry reads a staged record's entry, with an input, as the
// verifier does for every record: now, and as the oracle did.
func BenchmarkScanEntry(b *testing.B) {
	entry := []byte(entryCases[4])
	for _, scan := range []struct {
		name string
		fn   func([]byte) (entryColumns, error)
	}{{"one_walk", scanEntry}, {"before", scanEntryBefore}} {
		b.Run(scan.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(entry)))
			for b.Loop() {
				if _, err := scan.fn(entry); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
