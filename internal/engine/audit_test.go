package engine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	url     string
	admin   *pgxpool.Pool // superuser: plays the tamperer
	runtime *pgxpool.Pool // the server's own pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := testdb.New(t)
	return &testBundle{url: url, admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url)}
}

func record(tenant string, phase engine.Phase, correlation string) *engine.Record {
	return &engine.Record{
		Tenant:        tenant,
		At:            time.Now(),
		CorrelationID: correlation,
		Phase:         phase,
		Action:        "cancel_order",
		Actor:         engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent},
		Input:         json.RawMessage(`{"order_id": "o-1", "reason": "customer asked"}`),
	}
}

// appendN appends n records to tenant's chain, one transaction each, and
// seals them.
func appendN(t *testing.T, pool *pgxpool.Pool, tenant string, n int) {
	t.Helper()
	for i := range n {
		err := database.InTenant(context.Background(), pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(context.Background(), tx, record(tenant, engine.PhaseStaged, fmt.Sprintf("c-%d", i)))
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if sealed, err := engine.SealTenant(context.Background(), pool, tenant); err != nil || sealed != n {
		t.Fatalf("sealed %d of %d records: %v", sealed, n, err)
	}
}

func TestAppendAuditChainsTheExactBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	appendN(t, b.runtime, "acme", 5)

	// The Go formula and the SQL one agree, over the stored bytes, and
	// the records were sealed in the order they were written.
	rows, err := b.admin.Query(ctx, "SELECT seq, entry, prev_hash, hash, correlation_id FROM orangerail.audit WHERE tenant_id = 'acme' ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	prev := engine.Genesis()
	n := 0
	for rows.Next() {
		var seq int64
		var entry, prevHash, hash []byte
		var corr string
		if err := rows.Scan(&seq, &entry, &prevHash, &hash, &corr); err != nil {
			t.Fatal(err)
		}
		if seq != int64(n+1) || corr != fmt.Sprintf("c-%d", n) {
			t.Fatalf("record %s sealed at seq %d, want record c-%d at seq %d", corr, seq, n, n+1)
		}
		if !bytes.Equal(prevHash, prev) {
			t.Fatalf("seq %d: prev_hash %x, want %x", seq, prevHash, prev)
		}
		if want := engine.ChainHash(prev, seq, entry); !bytes.Equal(hash, want) {
			t.Fatalf("seq %d: hash %x, Go computes %x", seq, hash, want)
		}
		prev = hash
		n++
	}
	if rows.Err() != nil || n != 5 {
		t.Fatalf("read %d rows: %v", n, rows.Err())
	}

	// The stored entry is the record's canonical bytes, and the queryable
	// columns come from them.
	var entry []byte
	var phase, actor, corr string
	if err := b.admin.QueryRow(ctx, "SELECT entry, phase, actor, correlation_id FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 1").
		Scan(&entry, &phase, &actor, &corr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(entry, []byte(`"input":{"order_id":"o-1","reason":"customer asked"}`)) {
		t.Fatalf("entry is not canonical: %s", entry)
	}
	if phase != "staged" || actor != "agent-7" || corr != "c-0" {
		t.Fatalf("columns = %q %q %q", phase, actor, corr)
	}

	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || report.Records != 5 || report.HeadSeq != 5 {
		t.Fatalf("report = %+v", report)
	}
}

func TestAppendAuditRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	appendRaw := func(tenant string, entry string) error {
		return database.InTenant(ctx, b.runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return store.New(tx).AuditAppend(ctx, []byte(entry))
		})
	}
	valid := `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`
	if err := appendRaw("acme", valid); err != nil {
		t.Fatalf("valid entry refused: %v", err)
	}
	tests := []struct {
		name   string
		tenant string
		entry  string
		state  string
	}{
		{"another tenant's entry", "other", valid, "ORA03"},
		{"not json", "acme", `{"v":1`, pgerrcode.InvalidTextRepresentation},
		{"not utf-8", "acme", "\xff\xfe", pgerrcode.CharacterNotInRepertoire},
		{"not an object", "acme", `[1]`, "ORA02"},
		{"duplicate key", "acme", `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","phase":"approved","tenant":"acme","v":1}`, "ORA02"},
		{"duplicate actor key", "acme", `{"actor":{"kind":"agent","subject":"a","subject":"b"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`, "ORA02"},
		{"wrong version", "acme", `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":2}`, "ORA02"},
		{"time without microseconds", "acme", `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`, "ORA02"},
		{"unknown actor kind", "acme", `{"actor":{"kind":"robot","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`, "ORA02"},
		{"missing dev_mode", "acme", `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","phase":"staged","tenant":"acme","v":1}`, "ORA02"},
		{"upper-case phase", "acme", `{"actor":{"kind":"agent","subject":"a"},"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"Staged","tenant":"acme","v":1}`, "ORA02"},
		{"bad approval id", "acme", `{"actor":{"kind":"agent","subject":"a"},"approval_id":"x","at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1}`, "ORA02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := appendRaw(tt.tenant, tt.entry)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tt.state {
				t.Fatalf("append = %v, want SQLSTATE %s", err, tt.state)
			}
		})
	}

	// Without a tenant in the transaction, nothing is appended.
	conn, err := b.runtime.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	err = store.New(conn).AuditAppend(ctx, []byte(valid))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "ORA03" {
		t.Fatalf("append without tenant = %v, want ORA03", err)
	}

	// Through the engine, refusals carry codes.
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		err := engine.AppendAudit(ctx, tx, record("other", engine.PhaseStaged, "c"))
		return err
	})
	if errcode.Of(err) != errcode.TenantInvalid {
		t.Fatalf("engine append for another tenant = %v, want %s", err, errcode.TenantInvalid)
	}
	err = database.InTenant(ctx, b.runtime, "bad tenant!", pgx.TxOptions{}, func(pgx.Tx) error { return nil })
	if errcode.Of(err) != errcode.TenantInvalid {
		t.Fatalf("InTenant with a malformed id = %v, want %s", err, errcode.TenantInvalid)
	}

	if _, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil {
		t.Fatal(err)
	}
	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !report.OK() || report.Records != 1 || report.Pending != 0 {
		t.Fatalf("refused appends left a trace: %+v, %v", report, err)
	}
}

// TestAuditEntryShapes holds the database's entry rules to the patterns
// they state: each field whose shape audit_entry_columns tests (by mapping
// characters, not by a regular expression) is accepted exactly when the
// pattern matches it, over values at and past every edge of the pattern.
// Members repeated where a verifier looks are refused whatever else the
// entry holds; repeated deeper, they are not the entry rules' concern.
func TestAuditEntryShapes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// refusal is the database's refusal of entry's columns, nil when it
	// reads them.
	refusal := func(t *testing.T, entry string) *pgconn.PgError {
		t.Helper()
		err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT orangerail.audit_entry_columns($1)", []byte(entry))
			return err
		})
		var pgErr *pgconn.PgError
		if err != nil && !errors.As(err, &pgErr) {
			t.Fatalf("entry %s: %v", entry, err)
		}
		return pgErr
	}
	accepted := func(t *testing.T, entry string) bool {
		t.Helper()
		return refusal(t, entry) == nil
	}
	entryWith := func(field string, value string) string {
		fields := map[string]any{"actor": map[string]string{"kind": "agent", "subject": "a"}, "at": "2026-11-29T20:56:15.123456Z",
			"correlation_id": "c", "dev_mode": false, "phase": "staged", "tenant": "acme", "v": 1,
			"approval_id": "0f8fad5b-d9cb-469f-a165-70867728950e"}
		fields[field] = value
		entry, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return string(entry)
	}
	// A value off its pattern is refused for its shape, by the rule that
	// names it, before any rule that might read it.
	shapes := []struct {
		field   string
		pattern *regexp.Regexp
		wants   func(string) bool // nil: what the pattern matches
		refusal string
		values  []string
	}{
		{"phase", regexp.MustCompile(`^[a-z][a-z_]{0,63}$`), nil, `audit entry field "phase" must be a lower-case name`, []string{
			"a", "staged", "execution_started", "a_", "a__b", strings.Repeat("a", 64), strings.Repeat("a", 65), "a" + strings.Repeat("_", 63),
			"", "_", "_a", "A", "aB", "a-b", "a b", "a1", "1a", "é", "aé", "ａ", "a\n", "a\x7f", "#", "a%",
		}},
		{"approval_id", regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), nil,
			`audit entry field "approval_id" must be a lower-case UUID`, []string{
				"0f8fad5b-d9cb-469f-a165-70867728950e", "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
				"0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5bd9cb469fa16570867728950e", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950e0",
				"0f8fad5bd-9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950g", "{0f8fad5b-d9cb-469f-a165-70867728950e}",
				"0f8fad5b-d9cb-469f-a165-70867728950é", "0f8fad5b-d9cb-469f-a165-7086772895０e", "--------------------------------0000", "",
			}},
		{"at", regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$`), func(v string) bool {
			// The pattern, and an instant that reads back as spelled.
			at, err := time.Parse("2006-01-02T15:04:05.000000Z", v)
			return err == nil && at.Format("2006-01-02T15:04:05.000000Z") == v
		}, `audit entry field "at" must be an RFC 3339 UTC time with microseconds`, []string{
			"2026-11-29T20:56:15.123456Z", "1999-01-01T00:00:00.000000Z", "2026-11-29T20:56:15.12345aZ", "2026-11-29T20:56:15.1234567Z",
			"2026-11-29T20:56:15.12345Z", "2026-11-29T20:56:15.123456z", "2026-11-29 20:56:15.123456Z", "2026-11-29T20:56:15,123456Z",
			"٢026-11-29T20:56:15.123456Z", "2026-11-29T20:56:15.123456Z ", "#026-11-29T20:56:15.123456Z", "2026-11-29T20:56:15.123456+00:00",
			"2026-11-29T24:00:00.000000Z", "2026-02-30T00:00:00.000000Z", "",
		}},
	}
	for _, shape := range shapes {
		for _, v := range shape.values {
			matches := shape.pattern.MatchString(v)
			want := matches && (shape.wants == nil || shape.wants(v))
			refused := refusal(t, entryWith(shape.field, v))
			if got := refused == nil; got != want {
				t.Errorf("%s %q: accepted = %v, want %v", shape.field, v, got, want)
			}
			if !matches && refused != nil && (refused.Code != "ORA02" || refused.Message != shape.refusal) {
				t.Errorf("%s %q: refused with %s %q, want ORA02 %q", shape.field, v, refused.Code, refused.Message, shape.refusal)
			}
		}
	}

	const rest = `"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":"staged","tenant":"acme","v":1`
	repeats := []struct {
		name     string
		entry    string
		accepted bool
	}{
		{"no repeat, with escapes", `{"actor":{"kind":"agent","subject":"a\"b\\c"},"action":"x\u00e9:y",` + rest + `}`, true},
		{"repeated member, with an escape elsewhere", `{"actor":{"kind":"agent","subject":"a\"b"},"phase":"approved",` + rest + `}`, false},
		{"repeated actor member, with an escape", `{"actor":{"kind":"agent","subject":"a","subject":"b\n"},` + rest + `}`, false},
		// The dropped member's colon is made up for by an escaped one,
		// which the jsonb's text spells as a colon: only the escape tells.
		{"repeated member, colons made up by an escape", `{"actor":{"kind":"agent","subject":"a"},"action":"\u003a","phase":"approved",` + rest + `}`, false},
		{"repeated member holding colons", `{"actor":{"kind":"agent","subject":"a"},"action":"p:q","action":"r",` + rest + `}`, false},
		{"repeated member deeper", `{"actor":{"kind":"agent","subject":"a"},"input":{"k":1,"k":2},` + rest + `}`, true},
	}
	for _, tt := range repeats {
		if got := accepted(t, tt.entry); got != tt.accepted {
			t.Errorf("%s: accepted = %v, want %v", tt.name, got, tt.accepted)
		}
	}
}

func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendN(t, b.runtime, "acme", 3)

	statements := []string{
		"UPDATE orangerail.audit SET phase = 'forged' WHERE seq = 2",
		"DELETE FROM orangerail.audit WHERE seq = 3",
		"TRUNCATE orangerail.audit",
		"UPDATE orangerail.audit_heads SET seq = 1",
		"DELETE FROM orangerail.audit_heads",
		"INSERT INTO orangerail.audit (tenant_id, seq, entry, at, correlation_id, phase, actor, actor_kind, dev_mode, prev_hash, hash) " +
			"SELECT tenant_id, 99, entry, at, correlation_id, phase, actor, actor_kind, dev_mode, prev_hash, hash FROM orangerail.audit WHERE seq = 1",
		// audit_insert writes the columns it is given: only the owner's
		// functions, which parse them from the entry, may call it.
		"SELECT orangerail.audit_insert(entry, ROW(tenant_id, at, correlation_id, 'forged', action, actor, actor_kind, dev_mode, approval_id)::orangerail.audit_columns) " +
			"FROM orangerail.audit WHERE seq = 1",
	}
	// Runtime and auditor are refused by privileges.
	for _, role := range []string{"orangerail_runtime", "orangerail_auditor", "orangerail_readonly"} {
		for _, stmt := range statements {
			err := withRole(ctx, b.admin, role, "acme", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, stmt)
				return err
			})
			if state := sqlState(err); state != pgerrcode.InsufficientPrivilege {
				t.Errorf("as %s, %q: got %v, want permission denied", role, stmt, err)
			}
		}
	}
	// Even the owner is refused by the triggers, with replication-role
	// replica (which skips ordinary triggers) in force.
	for _, stmt := range statements[:5] {
		_, err := b.admin.Exec(ctx, "SET session_replication_role = replica; "+stmt)
		if state := sqlState(err); state != "ORA01" {
			t.Errorf("as owner with replica role, %q: got %v, want ORA01", stmt, err)
		}
	}
	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !report.OK() || report.Records != 3 {
		t.Fatalf("after refused changes: %+v, %v", report, err)
	}
}

func TestRuntimeRoleHasNoTableAndNoBypass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var bypass, login bool
	if err := b.admin.QueryRow(ctx, "SELECT rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = 'orangerail_runtime'").Scan(&bypass, &login); err != nil {
		t.Fatal(err)
	}
	if bypass || login {
		t.Fatalf("orangerail_runtime: bypassrls=%v login=%v", bypass, login)
	}
	var owned int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
		WHERE r.rolname IN ('orangerail_runtime', 'orangerail_auditor', 'orangerail_readonly')`).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if owned != 0 {
		t.Fatalf("orangerail roles own %d relations", owned)
	}
	// The server's pool really runs as the runtime role.
	var who string
	if err := b.runtime.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "orangerail_runtime" {
		t.Fatalf("pool runs as %q (%v)", who, err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendN(t, b.runtime, "tenant-a", 3)
	appendN(t, b.runtime, "tenant-b", 2)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		err := database.InTenant(ctx, b.runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return stageApproval(ctx, tx, tenant, uuid.New(), `{"order_id":"o-1"}`)
		})
		if err != nil {
			t.Fatalf("stage approval for %s: %v", tenant, err)
		}
	}

	count := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, table, tenant string) int {
		var n int
		if err := q.QueryRow(ctx, "SELECT count(*) FROM orangerail."+table+" WHERE tenant_id = $1", tenant).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}

	// Runtime: the transaction's tenant only, whatever the query asks for.
	for _, table := range []string{"audit", "approvals", "audit_heads"} {
		_ = database.InTenant(ctx, b.runtime, "tenant-a", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if n := count(tx, table, "tenant-b"); n != 0 {
				t.Errorf("runtime scoped to tenant-a sees %d %s rows of tenant-b", n, table)
			}
			if n := count(tx, table, "tenant-a"); n == 0 {
				t.Errorf("runtime scoped to tenant-a sees none of its own %s rows", table)
			}
			return nil
		})
	}
	// Runtime writing into another tenant is refused: it changes approvals
	// only through functions that take the transaction's tenant.
	err := database.InTenant(ctx, b.runtime, "tenant-a", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
			VALUES (gen_random_uuid(), 'tenant-b', 'x', 'y', '{}', $1, $1, now() + interval '1 hour')`, make([]byte, 32))
		return err
	})
	if sqlState(err) != pgerrcode.InsufficientPrivilege {
		t.Fatalf("cross-tenant insert = %v, want a refusal", err)
	}
	// Without a tenant, the runtime sees nothing.
	if n := count(b.runtime, "audit", "tenant-a"); n != 0 {
		t.Fatalf("runtime without a tenant sees %d audit rows", n)
	}

	// Auditors: a login sees the tenants granted to it, and setting the
	// tenant variable gains nothing.
	auditorA := auditorLogin(t, b, "tenant-a")
	for _, table := range []string{"audit", "approvals", "audit_heads"} {
		if n := count(auditorA, table, "tenant-b"); n != 0 {
			t.Errorf("auditor of tenant-a sees %d %s rows of tenant-b", n, table)
		}
		if n := count(auditorA, table, "tenant-a"); n == 0 {
			t.Errorf("auditor of tenant-a sees none of its %s rows", table)
		}
	}
	var n int
	err = auditorA.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'tenant-b' AND set_config('orangerail.tenant_id', 'tenant-b', false) IS NOT NULL").Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("auditor setting the tenant variable sees %d rows (%v)", n, err)
	}
	if _, err := auditorA.Exec(ctx, "SET ROLE orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	if n := count(auditorA, "audit", "tenant-b"); n != 0 {
		t.Fatalf("auditor after SET ROLE sees %d rows of tenant-b", n)
	}
	// The SQL verifier, run by the auditor, verifies its tenant and sees
	// nothing of the other.
	var problems int
	if err := auditorA.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_verify('tenant-a')").Scan(&problems); err != nil || problems != 0 {
		t.Fatalf("auditor verifying its tenant: %d problems, %v", problems, err)
	}
	// A tenant it cannot see, one that does not exist (a typo), and one
	// that never wrote a record are not reported whole: nothing was
	// checked, and the one row says so.
	for _, tenant := range []string{"tenant-b", "tenant-aa", "tenant-c"} {
		rows, err := auditorA.Query(ctx, "SELECT seq, problem, expected_hash, found_hash FROM orangerail.audit_verify($1)", tenant)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Seq             *int64
			Problem         string
			Expected, Found []byte
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Problem != "nothing_visible" || got[0].Seq != nil || got[0].Expected != nil || got[0].Found != nil {
			t.Errorf("auditor of tenant-a verifying %s: %+v, want one row nothing_visible", tenant, got)
		}
	}
	if _, err := b.admin.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('tenant-c')"); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_verify('tenant-c')").Scan(&problems); err != nil || problems != 1 {
		t.Fatalf("the owner verifying a tenant with no record: %d rows, %v", problems, err)
	}
	// The Go verifier says the same of it, and of a tenant that does not
	// exist: nothing was checked, a finding.
	for _, tenant := range []string{"tenant-c", "tenant-aa"} {
		r, err := engine.VerifyTenant(ctx, b.runtime, tenant, engine.VerifyOptions{})
		if err != nil || !r.NothingVisible || r.OK() {
			t.Fatalf("Go verifier of %s: nothing visible %t, OK %t, %v; want nothing visible, a finding", tenant, r.NothingVisible, r.OK(), err)
		}
	}
	// A head with no sealed record under it is an empty chain, and whole,
	// to both: the head a tenant's opening makes, before its first record
	// (the engine's, or granting its auditor).
	if err := database.InTenant(ctx, b.admin, "tenant-c", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return store.New(tx).TenantOpen(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_verify('tenant-c')").Scan(&problems); err != nil || problems != 0 {
		t.Fatalf("the owner verifying an empty chain: %d rows, %v", problems, err)
	}
	if r, err := engine.VerifyTenant(ctx, b.runtime, "tenant-c", engine.VerifyOptions{}); err != nil || r.NothingVisible || !r.OK() {
		t.Fatalf("Go verifier of an empty chain: nothing visible %t, OK %t, %v", r.NothingVisible, r.OK(), err)
	}
}

// TestOwnerUnscopedSeesNothingVisible: an owner that is no superuser sees
// every tenant's unsealed records but, in a transaction not scoped to a
// tenant, none of its sealed records and no head. audit_verify called so
// (from psql, as the README shows) checks nothing, and says so
// (nothing_visible) rather than returning no row — whole — over a chain
// that is broken. Scoped to the tenant, it finds the break, as the Go
// verifier does.
func TestOwnerUnscopedSeesNothingVisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL, admin := testdb.NewOwned(t)
	ownerPool, runtime := testdb.Pool(t, ownerURL), testdb.RuntimePool(t, ownerURL)
	appendN(t, runtime, "acme", 3)
	for i := range 2 { // awaiting their seal
		if err := database.InTenant(ctx, runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseStaged, fmt.Sprintf("u-%d", i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	tamper(t, &testBundle{admin: admin}, "DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 2")

	problemsOf := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}) []string {
		rows, err := q.Query(ctx, "SELECT problem FROM orangerail.audit_verify('acme')")
		if err != nil {
			t.Fatal(err)
		}
		problems, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return problems
	}
	var unsealed int
	if err := ownerPool.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme'").Scan(&unsealed); err != nil || unsealed != 2 {
		t.Fatalf("the owner, unscoped, sees %d of acme's records (%v), want its 2 unsealed ones", unsealed, err)
	}
	if got := problemsOf(ownerPool); len(got) != 1 || got[0] != "nothing_visible" {
		t.Fatalf("the owner, unscoped: %v, want [nothing_visible]", got)
	}
	err := database.InTenant(ctx, ownerPool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if got := problemsOf(tx); len(got) != 1 || got[0] != string(engine.ProblemSeqGap) {
			t.Errorf("the owner, scoped to acme: %v, want [%s]", got, engine.ProblemSeqGap)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := engine.VerifyTenant(ctx, runtime, "acme", engine.VerifyOptions{}); err != nil || r.Break == nil || r.Break.Problem != engine.ProblemSeqGap {
		t.Fatalf("Go verifier: %+v, %v; want a seq_gap", r, err)
	}
}

// auditorLogin creates a LOGIN role in orangerail_auditor granted one tenant
// and returns a connection logged in as it.
func auditorLogin(t *testing.T, b *testBundle, tenant string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	name := "auditor_" + uuid.NewString()[:8]
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := b.admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN PASSWORD 'pw' IN ROLE orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = b.admin.Exec(context.Background(), "DROP OWNED BY "+ident)
		_, _ = b.admin.Exec(context.Background(), "DROP ROLE "+ident)
	})
	if _, err := b.admin.Exec(ctx, "INSERT INTO orangerail.auditor_grants (role_name, tenant_id) VALUES ($1, $2)", name, tenant); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testdb.WithUser(t, b.url, name, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func withRole(ctx context.Context, pool *pgxpool.Pool, role, tenant string, fn func(pgx.Tx) error) error {
	return database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			return err
		}
		return fn(tx)
	})
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// stageApproval stages a pending approval of cancel_order with the given
// input, through the audited function the engine uses.
func stageApproval(ctx context.Context, tx pgx.Tx, tenant string, id uuid.UUID, input string) error {
	rec := record(tenant, engine.PhaseStaged, id.String())
	rec.ApprovalID = &id
	entry, err := rec.Entry()
	if err != nil {
		return err
	}
	digest := sha256.Sum256([]byte(input + id.String()))
	_, err = store.New(tx).ApprovalStage(ctx, &store.ApprovalStageParams{
		ID: id, Action: "cancel_order", RequestedBy: "agent-7", Input: []byte(input),
		InputDigest: digest[:], DefinitionHash: make([]byte, 32), ExpiresAt: time.Now().Add(time.Hour), Entry: entry,
	})
	return err
}

// decideApproval decides a pending approval of cancel_order as a person,
// through the audited function the engine uses.
func decideApproval(ctx context.Context, tx pgx.Tx, tenant string, id uuid.UUID, status store.ApprovalStatus, by string) error {
	rec := record(tenant, engine.Phase(status), id.String())
	rec.ApprovalID, rec.Actor, rec.Input = &id, engine.Actor{Subject: by, Kind: engine.ActorHuman}, nil
	entry, err := rec.Entry()
	if err != nil {
		return err
	}
	_, err = store.New(tx).ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: id, Status: status, DecidedBy: by, Entry: entry})
	return err
}
