package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// tamper runs statements as the superuser with the audit table's triggers
// disabled: the attacker the chain must expose.
func tamper(t *testing.T, b *testBundle, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	all := append([]string{
		"ALTER TABLE orangerail.audit DISABLE TRIGGER USER",
		"ALTER TABLE orangerail.audit_heads DISABLE TRIGGER USER",
	}, stmts...)
	all = append(all,
		"ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete",
		"ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate",
		"ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_advance_only",
		"ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_delete",
		"ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_truncate",
	)
	for _, s := range all {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("tamper %q: %v", s, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// sqlBreak runs the SQL-only verifier.
func sqlBreak(t *testing.T, b *testBundle, tenant string) *engine.ChainBreak {
	t.Helper()
	var rows []*store.AuditBreak
	err := database.InTenant(context.Background(), b.runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		rows, err = store.New(tx).AuditVerify(context.Background(), tenant)
		return err
	})
	if err != nil {
		t.Fatalf("SQL verifier: %v", err)
	}
	switch len(rows) {
	case 0:
		return nil
	case 1:
		return &engine.ChainBreak{Seq: rows[0].Seq, Problem: engine.Problem(rows[0].Problem), Expected: rows[0].ExpectedHash, Found: rows[0].FoundHash}
	}
	t.Fatalf("SQL verifier returned %d rows, want at most 1", len(rows))
	return nil
}

func TestVerifiersCatchTampering(t *testing.T) {
	t.Parallel()

	// Each case tampers with a 10-record chain of tenant "acme".
	tests := []struct {
		name    string
		tamper  []string
		after   int // records appended after tampering, as the runtime
		wantSeq int64
		want    engine.Problem // "" for a clean chain
	}{
		{name: "clean chain"},
		{
			name:    "one changed byte in an entry",
			tamper:  []string{"UPDATE orangerail.audit SET entry = overlay(entry placing '\\x5a'::bytea from octet_length(entry) - 20 for 1) WHERE tenant_id = 'acme' AND seq = 4"},
			wantSeq: 4, want: engine.ProblemHash,
		},
		{
			name:    "deleted row",
			tamper:  []string{"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 5"},
			wantSeq: 6, want: engine.ProblemSeqGap,
		},
		{
			name:    "a sealed row unsealed again",
			tamper:  []string{"UPDATE orangerail.audit SET seq = NULL, prev_hash = NULL, hash = NULL, sealed_at = NULL WHERE tenant_id = 'acme' AND seq = 5"},
			wantSeq: 6, want: engine.ProblemSeqGap,
		},
		{
			name:    "the last sealed row unsealed again",
			tamper:  []string{"UPDATE orangerail.audit SET seq = NULL, prev_hash = NULL, hash = NULL, sealed_at = NULL WHERE tenant_id = 'acme' AND seq = 10"},
			wantSeq: 10, want: engine.ProblemHeadMismatch,
		},
		{
			name: "a sealed row unsealed again, then sealed anew at the end",
			tamper: []string{
				"UPDATE orangerail.audit SET seq = NULL, prev_hash = NULL, hash = NULL, sealed_at = NULL WHERE tenant_id = 'acme' AND seq = 5",
				"SELECT set_config('orangerail.tenant_id', 'acme', true)",
				"SELECT orangerail.audit_seal(100, true)",
			},
			wantSeq: 6, want: engine.ProblemSeqGap,
		},
		{
			name: "two swapped rows",
			tamper: []string{
				"UPDATE orangerail.audit SET seq = 1000 WHERE tenant_id = 'acme' AND seq = 3",
				"UPDATE orangerail.audit SET seq = 3 WHERE tenant_id = 'acme' AND seq = 4",
				"UPDATE orangerail.audit SET seq = 4 WHERE tenant_id = 'acme' AND seq = 1000",
			},
			wantSeq: 3, want: engine.ProblemPrevHash,
		},
		{
			name: "forged entry with its hash recomputed",
			tamper: []string{
				`UPDATE orangerail.audit a SET entry = convert_to(replace(convert_from(a.entry, 'UTF8'), '"correlation_id":"c-5"', '"correlation_id":"c-X"'), 'UTF8'),
				        correlation_id = 'c-X' WHERE tenant_id = 'acme' AND seq = 6`,
				`UPDATE orangerail.audit a SET hash = sha256(a.prev_hash || int8send(a.seq) || sha256(a.entry)) WHERE tenant_id = 'acme' AND seq = 6`,
			},
			wantSeq: 7, want: engine.ProblemPrevHash,
		},
		{
			name: "forged entry with its hash and the next prev_hash recomputed",
			tamper: []string{
				`UPDATE orangerail.audit a SET entry = convert_to(replace(convert_from(a.entry, 'UTF8'), '"correlation_id":"c-5"', '"correlation_id":"c-X"'), 'UTF8'),
				        correlation_id = 'c-X' WHERE tenant_id = 'acme' AND seq = 6`,
				`UPDATE orangerail.audit a SET hash = sha256(a.prev_hash || int8send(a.seq) || sha256(a.entry)) WHERE tenant_id = 'acme' AND seq = 6`,
				`UPDATE orangerail.audit a SET prev_hash = (SELECT hash FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 6) WHERE tenant_id = 'acme' AND seq = 7`,
			},
			wantSeq: 7, want: engine.ProblemHash,
		},
		{
			// One row for the one break: SQL reported every record of the
			// seq, two rows where it returns the first broken link.
			name: "a sealed record copied under its own seq, its uniqueness dropped",
			tamper: []string{
				"ALTER TABLE orangerail.audit DROP CONSTRAINT audit_tenant_seq_key",
				`INSERT INTO orangerail.audit (tenant_id, seq, prev_hash, hash, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id, written_at, sealed_at)
				 SELECT tenant_id, seq, prev_hash, hash, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id, written_at, sealed_at
				 FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 4`,
			},
			wantSeq: 4, want: engine.ProblemSeqGap,
		},
		{
			name:    "queryable column changed, entry untouched",
			tamper:  []string{"UPDATE orangerail.audit SET phase = 'rejected' WHERE tenant_id = 'acme' AND seq = 2"},
			wantSeq: 2, want: engine.ProblemColumns,
		},
		{
			name:    "truncated tail",
			tamper:  []string{"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq >= 8"},
			wantSeq: 10, want: engine.ProblemHeadMismatch,
		},
		{
			name:    "truncated tail followed by new appends",
			tamper:  []string{"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq >= 8"},
			after:   2,
			wantSeq: 11, want: engine.ProblemSeqGap,
		},
		{
			name: "truncated tail with the head rewound",
			tamper: []string{
				"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq >= 8",
				"UPDATE orangerail.audit_heads SET seq = 7 WHERE tenant_id = 'acme'",
			},
			wantSeq: 7, want: engine.ProblemHeadMismatch,
		},
		{
			name: "the head's hash emptied",
			tamper: []string{
				"ALTER TABLE orangerail.audit_heads ALTER COLUMN hash DROP NOT NULL",
				"UPDATE orangerail.audit_heads SET hash = NULL WHERE tenant_id = 'acme'",
			},
			wantSeq: 10, want: engine.ProblemHeadMismatch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			appendN(t, b.runtime, "acme", 10)
			appendN(t, b.runtime, "bystander", 3)
			if len(tt.tamper) > 0 {
				tamper(t, b, tt.tamper...)
			}
			if tt.after > 0 {
				appendN(t, b.runtime, "acme", tt.after)
			}

			report, err := engine.VerifyTenant(context.Background(), b.runtime, "acme", engine.VerifyOptions{PageSize: 3})
			if err != nil {
				t.Fatalf("Go verifier: %v", err)
			}
			goBreak, sqlFound := report.Break, sqlBreak(t, b, "acme")
			if tt.want == "" {
				if goBreak != nil || sqlFound != nil {
					t.Fatalf("clean chain: Go %+v, SQL %+v", goBreak, sqlFound)
				}
				return
			}
			if goBreak == nil || goBreak.Seq != tt.wantSeq || goBreak.Problem != tt.want {
				t.Fatalf("Go verifier found %+v, want %s at seq %d", goBreak, tt.want, tt.wantSeq)
			}
			if sqlFound == nil || sqlFound.Seq != goBreak.Seq || sqlFound.Problem != goBreak.Problem ||
				!bytes.Equal(sqlFound.Expected, goBreak.Expected) || !bytes.Equal(sqlFound.Found, goBreak.Found) {
				t.Fatalf("verifiers disagree:\n Go  %+v\n SQL %+v", goBreak, sqlFound)
			}
			if bytes.Equal(goBreak.Expected, goBreak.Found) && tt.want != engine.ProblemColumns && tt.want != engine.ProblemPrevHash {
				t.Fatalf("a %s reports equal hashes %x", tt.want, goBreak.Found)
			}
			// The other tenant's chain is untouched and still verifies.
			if other, err := engine.VerifyTenant(context.Background(), b.runtime, "bystander", engine.VerifyOptions{}); err != nil || !other.OK() {
				t.Fatalf("bystander: %+v, %v", other, err)
			}
		})
	}
}

// TestVerifyReadsUnsealedRecordsWithNullColumns: a record awaiting its
// seal with a column emptied (a superuser dropped its constraint) does not
// stop the Go verifier — it failed the tenant, unable to scan the NULL —
// past the lag bound it is listed unsealed, as SQL's audit_unsealed lists
// it, and once sealed both verifiers report its columns.
func TestVerifyReadsUnsealedRecordsWithNullColumns(t *testing.T) {
	t.Parallel()
	for _, column := range []string{"at", "correlation_id", "phase", "actor", "actor_kind", "dev_mode"} {
		t.Run(column, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			appendN(t, b.runtime, "acme", 2)
			if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseExecutionStarted, "unsealed"))
			}); err != nil {
				t.Fatal(err)
			}
			tamper(t, b, "ALTER TABLE orangerail.audit ALTER COLUMN "+column+" DROP NOT NULL",
				"UPDATE orangerail.audit SET "+column+" = NULL, written_at = now() - interval '1 hour' WHERE tenant_id = 'acme' AND seq IS NULL")
			report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{LagBound: time.Minute})
			if err != nil || report.Break != nil || report.Pending != 1 || report.UnsealedTotal != 1 || report.OK() {
				t.Fatalf("Go verifier: %+v, %v; want the record pending and unsealed past the bound", report, err)
			}
			var listed int
			if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_unsealed('acme', interval '1 minute')").Scan(&listed)
			}); err != nil || listed != 1 {
				t.Fatalf("SQL's audit_unsealed listed %d, %v; want 1", listed, err)
			}
			if sealed, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil || sealed != 1 {
				t.Fatalf("sealed %d: %v", sealed, err)
			}
			report, err = engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
			if err != nil {
				t.Fatalf("Go verifier, sealed: %v", err)
			}
			goBreak, sqlFound := report.Break, sqlBreak(t, b, "acme")
			if goBreak == nil || goBreak.Seq != 3 || goBreak.Problem != engine.ProblemColumns {
				t.Fatalf("Go verifier found %+v, want %s at seq 3", goBreak, engine.ProblemColumns)
			}
			if sqlFound == nil || sqlFound.Seq != 3 || sqlFound.Problem != engine.ProblemColumns {
				t.Fatalf("SQL verifier found %+v, want %s at seq 3", sqlFound, engine.ProblemColumns)
			}
		})
	}
}

// TestVerifiersReportUnreadableEntries: an entry Postgres cannot read (not
// UTF-8, not JSON) is a finding of both verifiers, not an error, and the
// first problem still wins when it lies before or after it. The SQL
// verifier's pass over the records raises on such an entry and walks the
// chain again row by row; the entry after a broken link is never read.
func TestVerifiersReportUnreadableEntries(t *testing.T) {
	t.Parallel()
	notUTF8 := "UPDATE orangerail.audit SET entry = '\\xff7b7d'::bytea WHERE tenant_id = 'acme' AND seq = %d"
	notJSON := "UPDATE orangerail.audit SET entry = convert_to('{\"v\":1', 'UTF8') WHERE tenant_id = 'acme' AND seq = %d"
	tests := []tamperCase{
		{
			name:    "an entry not UTF-8, every link after it recomputed",
			tamper:  []string{fmt.Sprintf(notUTF8, 4), relink("acme", 4)},
			wantSeq: 4, want: engine.ProblemColumns,
		},
		{
			name:    "an entry not JSON, every link after it recomputed",
			tamper:  []string{fmt.Sprintf(notJSON, 4), relink("acme", 4)},
			wantSeq: 4, want: engine.ProblemColumns,
		},
		{
			name: "an entry not JSON after a column changed",
			tamper: []string{
				"UPDATE orangerail.audit SET phase = 'rejected' WHERE tenant_id = 'acme' AND seq = 2",
				fmt.Sprintf(notJSON, 6), relink("acme", 6),
			},
			wantSeq: 2, want: engine.ProblemColumns,
		},
		{
			name: "an entry not UTF-8 before a deleted row",
			tamper: []string{
				fmt.Sprintf(notUTF8, 3), relink("acme", 3),
				"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 7",
			},
			wantSeq: 3, want: engine.ProblemColumns,
		},
		// A column a superuser emptied, its constraint dropped: each is a
		// finding of both verifiers, never a chain the Go one cannot read.
		nullColumn("entry", engine.ProblemHash),
		nullColumn("at", engine.ProblemColumns),
		nullColumn("correlation_id", engine.ProblemColumns),
		nullColumn("phase", engine.ProblemColumns),
		nullColumn("actor", engine.ProblemColumns),
		nullColumn("actor_kind", engine.ProblemColumns),
		nullColumn("dev_mode", engine.ProblemColumns),
		nullColumn("prev_hash", engine.ProblemPrevHash),
		nullColumn("hash", engine.ProblemHash),
		// The relations read an execution's start and an operator's
		// record further: their time, emptied, is a finding too.
		nullColumnOf("an execution's start", rewriteEntry(4, "phase", "staged", "execution_started"), "at", engine.ProblemColumns),
		nullColumnOf("an operator's record", rewriteEntry(4, "kind", "agent", "operator"), "at", engine.ProblemColumns),
		{
			// JSON the Go reader would read, nested past what Postgres'
			// stack allows: the server says so for both verifiers.
			name:    "an entry nested deeper than the server reads, every link after it recomputed",
			tamper:  []string{nestInput(4, 50_000), relink("acme", 4)},
			wantSeq: 4, want: engine.ProblemColumns,
		},
		{
			name:    "an entry nested deeper than the server reads after a deep one it reads",
			tamper:  []string{nestInput(3, 1_000), nestInput(5, 50_000), relink("acme", 3)},
			wantSeq: 5, want: engine.ProblemColumns,
		},
		{
			name: "an entry not UTF-8 after a deleted row",
			tamper: []string{
				"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 3",
				fmt.Sprintf(notUTF8, 7),
			},
			wantSeq: 4, want: engine.ProblemSeqGap,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			appendN(t, b.runtime, "acme", 10)
			tamper(t, b, tt.tamper...)
			report, err := engine.VerifyTenant(context.Background(), b.runtime, "acme", engine.VerifyOptions{PageSize: 3})
			if err != nil {
				t.Fatalf("Go verifier: %v", err)
			}
			goBreak, sqlFound := report.Break, sqlBreak(t, b, "acme")
			if goBreak == nil || goBreak.Seq != tt.wantSeq || goBreak.Problem != tt.want {
				t.Fatalf("Go verifier found %+v, want %s at seq %d", goBreak, tt.want, tt.wantSeq)
			}
			if sqlFound == nil || sqlFound.Seq != goBreak.Seq || sqlFound.Problem != goBreak.Problem ||
				!bytes.Equal(sqlFound.Expected, goBreak.Expected) || !bytes.Equal(sqlFound.Found, goBreak.Found) {
				t.Fatalf("verifiers disagree:\n Go  %+v\n SQL %+v", goBreak, sqlFound)
			}
		})
	}
}

// nestInput makes the input of acme's record seq arrays nested depth deep.
func nestInput(seq int64, depth int) string {
	return fmt.Sprintf(`UPDATE orangerail.audit SET entry = convert_to(regexp_replace(convert_from(entry, 'UTF8'),
		'"input":\{[^}]*\}', '"input":' || repeat('[', %[2]d) || repeat(']', %[2]d)), 'UTF8')
		WHERE tenant_id = 'acme' AND seq = %[1]d`, seq, depth)
}

// TestVerifiersReadADeepEntryTheServerReads: an entry nested deeper than
// the Go reader judges alone, which the server reads, is whole for both
// verifiers: the server was asked, and said it reads it.
func TestVerifiersReadADeepEntryTheServerReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appendN(t, b.runtime, "acme", 6)
	tamper(t, b, nestInput(4, 1_000), relink("acme", 4))
	report, err := engine.VerifyTenant(context.Background(), b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !report.OK() {
		t.Fatalf("Go verifier: %+v %v", report, err)
	}
	if found := sqlBreak(t, b, "acme"); found != nil {
		t.Fatalf("SQL verifier: %+v", found)
	}
}

// TestVerifiersReportAnEmptiedHeadOverAnEmptyChain: a head whose hash was
// emptied (its owner dropped the constraint) over a chain with nothing
// sealed yet is head_mismatch for both verifiers; the SQL one read the
// emptied hash as the genesis link and called the chain whole.
func TestVerifiersReportAnEmptiedHeadOverAnEmptyChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseStaged, "unsealed"))
	}); err != nil {
		t.Fatal(err)
	}
	if report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || report.Break != nil || sqlBreak(t, b, "acme") != nil {
		t.Fatalf("before: Go %+v, %v; SQL %+v", report, err, sqlBreak(t, b, "acme"))
	}
	tamper(t, b, "ALTER TABLE orangerail.audit_heads ALTER COLUMN hash DROP NOT NULL",
		"UPDATE orangerail.audit_heads SET hash = NULL WHERE tenant_id = 'acme'")
	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil {
		t.Fatalf("Go verifier: %v", err)
	}
	goBreak, sqlFound := report.Break, sqlBreak(t, b, "acme")
	if goBreak == nil || goBreak.Seq != 0 || goBreak.Problem != engine.ProblemHeadMismatch || goBreak.Found != nil {
		t.Fatalf("Go verifier found %+v, want %s at seq 0", goBreak, engine.ProblemHeadMismatch)
	}
	if sqlFound == nil || sqlFound.Seq != 0 || sqlFound.Problem != goBreak.Problem ||
		!bytes.Equal(sqlFound.Expected, goBreak.Expected) || sqlFound.Found != nil {
		t.Fatalf("verifiers disagree:\n Go  %+v\n SQL %+v", goBreak, sqlFound)
	}
	// An emptied seq, its hash the genesis link an empty chain's head
	// holds: both verifiers report the head, which names no record, at
	// seq 0 — where the Go one could not read it, and failed the tenant
	// as one it could not verify rather than report what it found.
	tamper(t, b, "ALTER TABLE orangerail.audit_heads ALTER COLUMN seq DROP NOT NULL",
		"UPDATE orangerail.audit_heads SET seq = NULL, hash = decode(repeat('00', 32), 'hex') WHERE tenant_id = 'acme'")
	report, err = engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || report.Break == nil || report.Break.Problem != engine.ProblemHeadMismatch || report.Break.Seq != 0 {
		t.Fatalf("Go verifier over a head with no seq: %+v %v, want %s at seq 0", report, err, engine.ProblemHeadMismatch)
	}
	if sqlFound := sqlBreak(t, b, "acme"); sqlFound == nil || sqlFound.Problem != engine.ProblemHeadMismatch || sqlFound.Seq != 0 ||
		!bytes.Equal(sqlFound.Expected, report.Break.Expected) || !bytes.Equal(sqlFound.Found, report.Break.Found) {
		t.Fatalf("verifiers disagree over a head with no seq:\n Go  %+v\n SQL %+v", report.Break, sqlFound)
	}
	// Nothing signs, or shows, a chain whose head names no record.
	signer, _ := signingKey(t, "orangerail.test")
	if _, err := engine.SignCheckpoint(ctx, b.runtime, "acme", signer, testDeployment); err == nil {
		t.Fatal("a checkpoint was signed over a head with no seq")
	}
}

// tamperCase tampers with a chain and names the first problem both
// verifiers must report.
type tamperCase struct {
	name    string
	tamper  []string
	wantSeq int64
	want    engine.Problem
}

// nullColumn is a tamper case that empties a column of seq 4.
func nullColumn(column string, want engine.Problem) tamperCase {
	return nullColumnOf("", nil, column, want)
}

// nullColumnOf is nullColumn of a record made what (described) by first.
func nullColumnOf(what string, first []string, column string, want engine.Problem) tamperCase {
	name := "a NULL " + column
	if what != "" {
		name += " of " + what
	}
	return tamperCase{
		name: name,
		tamper: append(first,
			"ALTER TABLE orangerail.audit ALTER COLUMN "+column+" DROP NOT NULL",
			"ALTER TABLE orangerail.audit DROP CONSTRAINT audit_link_whole",
			"UPDATE orangerail.audit SET "+column+" = NULL WHERE tenant_id = 'acme' AND seq = 4"),
		wantSeq: 4, want: want,
	}
}

// rewriteEntry rewrites acme's record seq, a staged one appendN made, so
// that its entry's member name (phase, or the actor's kind) says to where
// it said from, and its column says so too, every link after it
// recomputed: a whole record of another kind.
func rewriteEntry(seq int64, name, from, to string) []string {
	column := map[string]string{"phase": "phase", "kind": "actor_kind"}[name]
	return []string{
		fmt.Sprintf(`UPDATE orangerail.audit SET %[1]s = '%[4]s',
			entry = convert_to(replace(convert_from(entry, 'UTF8'), '"%[2]s":"%[3]s"', '"%[2]s":"%[4]s"'), 'UTF8')
			WHERE tenant_id = 'acme' AND seq = %[5]d`, column, name, from, to, seq),
		relink("acme", seq),
	}
}

func TestVerifyReportsUnfinishedAndUnaudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	approved, orphan := uuid.New(), uuid.New()
	appendPhase := func(tx pgx.Tx, phase engine.Phase, corr string, approval *uuid.UUID) {
		rec := record("acme", phase, corr)
		rec.ApprovalID = approval
		if err := engine.AppendAudit(ctx, tx, rec); err != nil {
			t.Fatalf("append %s: %v", phase, err)
		}
	}
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, id := range []uuid.UUID{approved, orphan} {
			if err := stageApproval(ctx, tx, "acme", id, `{"order_id":"o-1"}`); err != nil {
				return err
			}
			if err := decideApproval(ctx, tx, "acme", id, "approved", "human-1"); err != nil {
				return err
			}
			if _, _, err := store.New(tx).ApprovalConsume(ctx, "acme", id); err != nil {
				return err
			}
		}
		appendPhase(tx, engine.PhaseExecutionStarted, approved.String(), &approved)
		appendPhase(tx, engine.PhaseExecutionSucceeded, approved.String(), &approved)
		appendPhase(tx, engine.PhaseExecutionStarted, "direct-1", nil)
		appendPhase(tx, engine.PhaseExecutionStarted, "direct-2", nil)
		appendPhase(tx, engine.PhaseExecutionFailed, "direct-2", nil)
		appendPhase(tx, engine.PhaseExecutionStarted, "direct-3", nil)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if report.Break != nil || report.OK() {
		t.Fatalf("report = %+v, want findings and no break", report)
	}
	var goOpen []string
	for _, u := range report.Unfinished {
		goOpen = append(goOpen, u.CorrelationID)
	}
	if want := []string{"direct-1", "direct-3"}; !slices.Equal(goOpen, want) {
		t.Fatalf("unfinished = %v, want %v", goOpen, want)
	}
	if len(report.Unaudited) != 1 || report.Unaudited[0].ApprovalID != orphan {
		t.Fatalf("unaudited = %+v, want only %s", report.Unaudited, orphan)
	}

	// The SQL functions an auditor would use agree with the Go verifier.
	var sqlOpen []string
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := store.New(tx).AuditListUnfinished(ctx, "acme")
		for _, r := range rows {
			sqlOpen = append(sqlOpen, r.CorrelationID)
		}
		return err
	})
	if err != nil || !slices.Equal(sqlOpen, goOpen) {
		t.Fatalf("SQL unfinished = %v (%v), Go = %v", sqlOpen, err, goOpen)
	}
}

func TestConsumeIsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := stageApproval(ctx, tx, "acme", id, `{"order_id": "o-1"}`); err != nil {
			return err
		}
		err := decideApproval(ctx, tx, "acme", id, "approved", "human-1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			_ = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				if _, _, err := store.New(tx).ApprovalConsume(ctx, "acme", id); err == nil {
					wins.Add(1)
				}
				return nil
			})
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d consumers won, want exactly 1", wins.Load())
	}
	// The input is kept verbatim, whitespace and all.
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		a, err := store.New(tx).ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: "acme"})
		if err == nil && (string(a.Input) != `{"order_id": "o-1"}` || a.Status != store.ApprovalConsumed) {
			err = fmt.Errorf("approval = %s %s", a.Input, a.Status)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestApprovalLifecycleIsEnforced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return stageApproval(ctx, tx, "acme", id, `{}`)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"UPDATE orangerail.approvals SET input = '{\"order_id\":\"o-2\"}'",
		"UPDATE orangerail.approvals SET status = 'consumed', consumed_at = now()",
		"UPDATE orangerail.approvals SET expires_at = now() + interval '10 years'",
	} {
		// The runtime changes approvals only through the audited
		// functions; the owner, which may write, is held to the lifecycle.
		err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if sqlState(err) != "42501" {
			t.Errorf("runtime %q = %v, want permission denied", stmt, err)
		}
		if _, err := b.admin.Exec(ctx, stmt); sqlState(err) != "ORA04" {
			t.Errorf("owner %q = %v, want ORA04", stmt, err)
		}
		// Nor does replication-role replica, which skips ordinary
		// triggers, set the owner free of it: the lifecycle trigger fires
		// ALWAYS, as the audit log's do.
		if err := func() error {
			tx, err := b.admin.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, stmt)
			return err
		}(); sqlState(err) != "ORA04" {
			t.Errorf("owner with replica role %q = %v, want ORA04", stmt, err)
		}
	}
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM orangerail.approvals")
		return err
	})
	if sqlState(err) != "42501" {
		t.Fatalf("runtime delete = %v, want permission denied", err)
	}
	if _, err := b.admin.Exec(ctx, "SET session_replication_role = replica; DELETE FROM orangerail.approvals"); sqlState(err) != "ORA01" {
		t.Fatalf("owner delete with replica role = %v, want ORA01", err)
	}
}

// TestEntryIsCanonical pins the entry format auditors rely on.
func TestEntryIsCanonical(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("6f1d0d2e-0000-4000-8000-000000000001")
	rec := &engine.Record{
		Tenant: "acme", At: time.Date(2026, 11, 29, 20, 56, 15, 123456789, time.UTC), CorrelationID: id.String(),
		Phase: engine.PhaseExecutionFailed, Action: "cancel_order", Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent},
		ApprovalID: &id, Input: json.RawMessage(`{ "reason": "late", "order_id": "o-1" }`), Error: `duplicate key "orders_pkey"`,
	}
	got, err := rec.Entry()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"action":"cancel_order","actor":{"kind":"agent","subject":"agent-7"},"approval_id":"6f1d0d2e-0000-4000-8000-000000000001",` +
		`"at":"2026-11-29T20:56:15.123456Z","correlation_id":"6f1d0d2e-0000-4000-8000-000000000001","dev_mode":false,` +
		`"error":"duplicate key \"orders_pkey\"","input":{"order_id":"o-1","reason":"late"},"phase":"execution_failed","tenant":"acme","v":1}`
	if string(got) != want {
		t.Fatalf("entry\n got %s\nwant %s", got, want)
	}
}

// TestAfterConsumePhasesMatchSQL holds the Go set of post-consume phases
// and orangerail.approvals_unaudited to the same phases.
func TestAfterConsumePhasesMatchSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	all := []engine.Phase{engine.PhaseStaged, engine.PhaseApproved, engine.PhaseRejected, engine.PhaseExpired, engine.PhaseDryRun,
		engine.PhaseNotImplemented, engine.PhaseExecutionStarted, engine.PhaseExecutionSucceeded, engine.PhaseExecutionFailed,
		engine.PhasePreconditionFailed, engine.PhaseSignatureMismatch, engine.PhaseInvalidInput, engine.PhaseResolveError}
	for _, phase := range all {
		id := uuid.New()
		err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if err := stageApproval(ctx, tx, "acme", id, `{}`); err != nil {
				return err
			}
			q := store.New(tx)
			if err := decideApproval(ctx, tx, "acme", id, "approved", "h"); err != nil {
				return err
			}
			if _, _, err := q.ApprovalConsume(ctx, "acme", id); err != nil {
				return err
			}
			rec := record("acme", phase, id.String())
			rec.ApprovalID = &id
			err := engine.AppendAudit(ctx, tx, rec)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var orphaned bool
		err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			rows, _, err := store.New(tx).ApprovalListUnaudited(ctx, "acme", engine.ReportListMax)
			orphaned = slices.ContainsFunc(rows, func(r *store.ApprovalUnaudited) bool { return r.ApprovalID == id })
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if orphaned == engine.FollowsConsume(phase) {
			t.Errorf("phase %s: SQL says orphaned=%v, Go says it follows a consume=%v", phase, orphaned, engine.FollowsConsume(phase))
		}
	}
}

// TestVerifyAcrossBatches tampers with a 20-record chain read in batches
// of 7 (rows 1-7, 8-14, 15-20): in the middle of a batch, at its last row
// and at its first, whose previous row is in another batch. Whatever the
// batch size, the Go verifier reports what the SQL verifier reports, and
// the whole report is the same.
func TestVerifyAcrossBatches(t *testing.T) {
	t.Parallel()
	changeEntry := func(seq int) string {
		return fmt.Sprintf("UPDATE orangerail.audit SET entry = overlay(entry placing '\\x5a'::bytea from octet_length(entry) - 20 for 1) WHERE tenant_id = 'acme' AND seq = %d", seq)
	}
	changeColumn := func(seq int) string {
		return fmt.Sprintf("UPDATE orangerail.audit SET actor = 'someone-else' WHERE tenant_id = 'acme' AND seq = %d", seq)
	}
	changePrev := func(seq int) string {
		return fmt.Sprintf("UPDATE orangerail.audit SET prev_hash = sha256(prev_hash) WHERE tenant_id = 'acme' AND seq = %d", seq)
	}
	tests := []struct {
		name    string
		tamper  string
		wantSeq int64
		want    engine.Problem
	}{
		{"clean chain", "", 0, ""},
		{"entry changed mid-batch", changeEntry(11), 11, engine.ProblemHash},
		{"entry changed at a batch's last row", changeEntry(7), 7, engine.ProblemHash},
		{"entry changed at a batch's first row", changeEntry(8), 8, engine.ProblemHash},
		{"entry changed at the last batch's first row", changeEntry(15), 15, engine.ProblemHash},
		{"column changed at a batch's first row", changeColumn(15), 15, engine.ProblemColumns},
		{"column changed mid-batch", changeColumn(3), 3, engine.ProblemColumns},
		{"prev_hash changed at a batch's first row", changePrev(8), 8, engine.ProblemPrevHash},
		{"row deleted at a batch's first row", "DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 8", 9, engine.ProblemSeqGap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			appendN(t, b.runtime, "acme", 20)
			if tt.tamper != "" {
				tamper(t, b, tt.tamper)
			}
			var reports []string
			for _, size := range []int32{7, 1, 1000} {
				report, err := engine.VerifyTenant(context.Background(), b.runtime, "acme", engine.VerifyOptions{PageSize: size})
				if err != nil {
					t.Fatalf("batches of %d: %v", size, err)
				}
				wantRecords := int64(20)
				if strings.HasPrefix(tt.tamper, "DELETE") {
					wantRecords = 19
				}
				if report.Records != wantRecords {
					t.Fatalf("batches of %d: %d records, want %d", size, report.Records, wantRecords)
				}
				got := report.Break
				if tt.want == "" {
					if got != nil {
						t.Fatalf("clean chain in batches of %d: %+v", size, got)
					}
				} else if got == nil || got.Seq != tt.wantSeq || got.Problem != tt.want {
					t.Fatalf("batches of %d: found %+v, want %s at seq %d", size, got, tt.want, tt.wantSeq)
				}
				j, _ := json.Marshal(report)
				reports = append(reports, string(j))
			}
			if reports[0] != reports[1] || reports[0] != reports[2] {
				t.Fatalf("reports differ by batch size:\n%s\n%s\n%s", reports[0], reports[1], reports[2])
			}
			goReport, err := engine.VerifyTenant(context.Background(), b.runtime, "acme", engine.VerifyOptions{PageSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			goBreak, sqlFound := goReport.Break, sqlBreak(t, b, "acme")
			if (goBreak == nil) != (sqlFound == nil) || goBreak != nil && (sqlFound.Seq != goBreak.Seq || sqlFound.Problem != goBreak.Problem ||
				!bytes.Equal(sqlFound.Expected, goBreak.Expected) || !bytes.Equal(sqlFound.Found, goBreak.Found)) {
				t.Fatalf("verifiers disagree:\n Go  %+v\n SQL %+v", goBreak, sqlFound)
			}
		})
	}
}

// TestVerifyAllListsAChainWhoseTenantWasDeleted: a chain whose tenant row
// and head were deleted is still listed, and verified (its head missing),
// when audit verify's login bypasses Row Level Security — run, as the CLI
// runs it, on a pool whose connections act as the runtime role, which sees
// no record outside a tenant's scope.
func TestVerifyAllListsAChainWhoseTenantWasDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendN(t, b.runtime, "acme", 4)
	appendN(t, b.runtime, "bystander", 3)
	tamper(t, b,
		"DELETE FROM orangerail.audit_heads WHERE tenant_id = 'acme'",
		"DELETE FROM orangerail.tenants WHERE id = 'acme'")
	if tenants, listing, err := engine.VerifyTenants(ctx, b.runtime); err != nil || listing != engine.ListingWhole || !slices.Equal(tenants, []string{"acme", "bystander"}) {
		t.Fatalf("a superuser's listing: %v (%d), %v; want acme and bystander, whole", tenants, listing, err)
	}
	if tenants, err := engine.Tenants(ctx, b.runtime); err != nil || !slices.Equal(tenants, []string{"bystander"}) {
		t.Fatalf("the runtime role's tenants: %v, %v; want bystander alone (the server's sweeps list what it may see)", tenants, err)
	}
	reports, err := engine.VerifyAll(ctx, b.runtime, engine.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for _, r := range reports {
		tenants = append(tenants, r.Tenant)
		switch r.Tenant {
		case "acme":
			if r.OK() || r.Break == nil || r.Break.Problem != engine.ProblemHeadMismatch {
				t.Errorf("acme, its head deleted: %+v; want a head_mismatch", r.Break)
			}
		case "bystander":
			if !r.OK() {
				t.Errorf("bystander: %+v", r)
			}
		}
	}
	if !slices.Equal(tenants, []string{"acme", "bystander"}) {
		t.Fatalf("verified %v; want acme and bystander", tenants)
	}
	if got := sqlBreak(t, b, "acme"); got == nil || got.Problem != engine.ProblemHeadMismatch {
		t.Fatalf("SQL: %+v; want a head_mismatch", got)
	}
}

// TestVerifyTenantsOfALoginBoundByRowSecurity: a login that cannot bypass
// Row Level Security (here the schema's owner, no superuser, which FORCE
// binds) sees records only within a tenant's scope, so its listing cannot
// hold a chain whose tenant row and head were deleted, and says it is not
// whole; a superuser's on the same database is.
func TestVerifyTenantsOfALoginBoundByRowSecurity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL, admin := testdb.NewOwned(t)
	b := &testBundle{url: ownerURL, admin: admin, runtime: testdb.RuntimePool(t, ownerURL)}
	appendN(t, b.runtime, "acme", 2)
	appendN(t, b.runtime, "bystander", 2)
	tamper(t, b,
		"DELETE FROM orangerail.audit_heads WHERE tenant_id = 'acme'",
		"DELETE FROM orangerail.tenants WHERE id = 'acme'")
	if tenants, listing, err := engine.VerifyTenants(ctx, b.runtime); err != nil || listing != engine.ListingKnown || !slices.Equal(tenants, []string{"bystander"}) {
		t.Fatalf("the owner's listing: %v (%d), %v; want bystander alone, the known tenants", tenants, listing, err)
	}
	super := testdb.RuntimePool(t, admin.Config().ConnString())
	if tenants, listing, err := engine.VerifyTenants(ctx, super); err != nil || listing != engine.ListingWhole || !slices.Equal(tenants, []string{"acme", "bystander"}) {
		t.Fatalf("a superuser's listing: %v (%d), %v; want acme and bystander, whole", tenants, listing, err)
	}
}
