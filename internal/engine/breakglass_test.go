package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// runtimeLogin creates a LOGIN role that is a member of orangerail_runtime,
// as a deployment makes for the server, and returns its URL on b's
// database.
func runtimeLogin(t *testing.T, b *testBundle) string {
	t.Helper()
	name := "runtime_" + uuid.NewString()[:8]
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := b.admin.Exec(context.Background(), "CREATE ROLE "+ident+" LOGIN PASSWORD 'pw' IN ROLE orangerail_runtime; GRANT SELECT ON orangerail_schema_version TO "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = b.admin.Exec(context.Background(), "DROP OWNED BY "+ident+"; DROP ROLE "+ident)
	})
	return testdb.WithUser(t, b.url, name, "pw")
}

// TestBreakGlassDecidesAsTheOwner is issue 11's break-glass path: refused
// with a runtime login (its own, or the server's pool SET ROLE to the
// runtime) and without a reason; allowed with the owner's login, recorded
// as an operator with the session_user and the reason, without four-eyes,
// listed by both verifiers; the approval then executes for the agent; the
// digest and decided-once rules hold as for a person.
func TestBreakGlassDecidesAsTheOwner(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	stage := func(args string) (string, string) {
		t.Helper()
		out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(args))
		want(t, out, engine.StatusApprovalPending)
		v, err := b.engine.ShowApproval(ctx, "acme", out.ApprovalID.String())
		if err != nil {
			t.Fatal(err)
		}
		return out.ApprovalID.String(), v.Digest
	}
	id, digest := stage(`{"order_id": "o-1001", "reason": "the desk is down"}`)
	decision := engine.Decision{ApprovalID: id, Approve: true, Digest: digest, Note: "called the customer"}
	const reason = "desk outage INC-42"

	// A runtime login, and the server's own pool, are refused, and so is
	// a decision without a reason.
	runtimeURL := runtimeLogin(t, b.testBundle)
	runtimeOwn := testdb.Pool(t, runtimeURL)
	runtimeServer := testdb.RuntimePool(t, runtimeURL)
	for name, conn := range map[string]database.TxBeginner{"runtime login": runtimeOwn, "runtime login as the server": runtimeServer,
		"superuser SET ROLE orangerail_runtime": b.runtime} {
		if out := b.engine.DecideBreakGlass(ctx, conn, "acme", reason, decision); out.Code != errcode.BreakGlassRefused {
			t.Fatalf("%s: %s %s %v", name, out.Status, out.Code, out.Err)
		}
	}
	if out := b.engine.DecideBreakGlass(ctx, b.admin, "acme", " ", decision); out.Code != errcode.BreakGlassRefused {
		t.Fatalf("no reason: %s %s", out.Status, out.Code)
	}

	// The database refuses the runtime login's own forgery: an operator's
	// record through approval_decide, around the engine.
	forged, err := (&engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: id, Phase: engine.PhaseApproved, Action: "cancel_order",
		Actor: engine.Actor{Subject: "postgres", Kind: engine.ActorOperator}, ApprovalID: ptr(uuid.MustParse(id))}).Entry()
	if err != nil {
		t.Fatal(err)
	}
	err = database.InTenant(ctx, runtimeOwn, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := store.New(tx).ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: uuid.MustParse(id), Status: store.ApprovalApproved, DecidedBy: "postgres", Entry: forged})
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.Is(err, store.ErrNotOperator) || !errors.As(err, &pgErr) || pgErr.Code != "ORA06" {
		t.Fatalf("a runtime login's operator record: %v", err)
	}

	// The wrong digest is refused as for a person.
	wrong := decision
	wrong.Digest = "00" + digest[2:]
	if wrong.Digest == digest {
		wrong.Digest = "11" + digest[2:]
	}
	if out := b.engine.DecideBreakGlass(ctx, b.admin, "acme", reason, wrong); out.Code != errcode.ApprovalArgumentsMismatch {
		t.Fatalf("wrong digest: %s %s", out.Status, out.Code)
	}

	// A note no note may be is refused as for a person.
	noted := decision
	noted.Note = "a\x00"
	if out := b.engine.DecideBreakGlass(ctx, b.admin, "acme", reason, noted); out.Code != errcode.RequestInvalid {
		t.Fatalf("a note with a NUL: %s %s", out.Status, out.Code)
	}
	// So is a reason, which the record keeps beside the note: bytes that
	// are not UTF-8 would be recorded as other text than was given.
	for _, bad := range []string{"disk \xff full", "a\x00", strings.Repeat("r", engine.MaxNoteChars+1)} {
		if out := b.engine.DecideBreakGlass(ctx, b.admin, "acme", bad, decision); out.Code != errcode.RequestInvalid || len(out.Issues) != 1 || out.Issues[0].Path != "/reason" {
			t.Fatalf("the reason %.20q: %s %s %v", bad, out.Status, out.Code, out.Issues)
		}
	}

	// The owner decides. The requester is the agent, and an operator is
	// no verified person: four-eyes is not applied, even when on.
	out, decided := b.engine.DecideBreakGlassApproval(ctx, b.admin, "acme", reason, decision)
	want(t, out, engine.StatusOK)
	var login string
	if err := b.admin.QueryRow(ctx, "SELECT session_user").Scan(&login); err != nil {
		t.Fatal(err)
	}
	if decided == nil || decided.DecidedBy != login || decided.Status != store.ApprovalApproved {
		t.Fatalf("decided %+v, want by %s", decided, login)
	}
	var entry []byte
	var kind string
	if err := b.admin.QueryRow(ctx, "SELECT entry, actor_kind FROM orangerail.audit WHERE approval_id = $1 AND phase = 'approved'", id).Scan(&entry, &kind); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Actor  engine.Actor      `json:"actor"`
		Result map[string]string `json:"result"`
	}
	if err := json.Unmarshal(entry, &rec); err != nil || kind != "operator" ||
		rec.Actor != (engine.Actor{Subject: login, Kind: engine.ActorOperator}) ||
		rec.Result["break_glass_reason"] != reason || rec.Result["note"] != "called the customer" {
		t.Fatalf("the approved record: kind %s %s", kind, entry)
	}

	// Decided once.
	if out := b.engine.DecideBreakGlass(ctx, b.admin, "acme", reason, decision); out.Code != errcode.ApprovalDecided {
		t.Fatalf("twice: %s %s", out.Status, out.Code)
	}

	// The agent's check then executes it.
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if s := orderStatus(t, b.testBundle, "acme", "o-1001"); s != "cancelled" {
		t.Fatalf("order status %s", s)
	}

	// A rejection is recorded too; both verifiers list both decisions,
	// and a chain with them is clean.
	other, _ := stage(`{"order_id": "o-1002", "reason": "second"}`)
	want(t, b.engine.DecideBreakGlass(ctx, b.admin, "acme", "still down", engine.Decision{ApprovalID: other}), engine.StatusOK)
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !r.OK() {
		t.Fatalf("verify: %+v %v", r, err)
	}
	type listed struct {
		approval      string
		phase, reason string
		operator      string
	}
	var goList []listed
	for _, d := range r.BreakGlass {
		if d.At.IsZero() || d.ApprovalID == nil {
			t.Fatalf("break glass %+v", d)
		}
		goList = append(goList, listed{d.ApprovalID.String(), string(d.Phase), d.Reason, d.Operator})
	}
	wantList := []listed{{id, "approved", reason, login}, {other, "rejected", "still down", login}}
	if !slices.Equal(goList, wantList) {
		t.Fatalf("Go verifier lists %+v, want %+v", goList, wantList)
	}
	var sqlList []listed
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := store.New(tx).AuditListBreakGlass(ctx, "acme") // orangerail.audit_break_glass
		for _, r := range rows {
			if r.ApprovalID == nil || r.At.IsZero() {
				t.Errorf("SQL break glass %+v", r)
				continue
			}
			sqlList = append(sqlList, listed{r.ApprovalID.String(), r.Phase, r.Reason, r.Operator})
		}
		return err
	})
	if err != nil || !slices.Equal(sqlList, wantList) {
		t.Fatalf("SQL verifier lists %+v (%v), want %+v", sqlList, err, wantList)
	}
}

func ptr[T any](v T) *T { return &v }

// TestActorKindsMatchSQL holds the Go list of actor kinds and the kinds
// orangerail.audit_entry_columns accepts to the same set.
func TestActorKindsMatchSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, kind := range append(engine.ActorKinds(), "person", "Operator", "") {
		rec := record("acme", engine.PhaseStaged, "c")
		rec.Actor.Kind = kind
		entry, err := rec.Entry()
		if err != nil {
			t.Fatal(err)
		}
		var sqlKind string
		sqlErr := b.admin.QueryRow(context.Background(), "SELECT (orangerail.audit_entry_columns($1)).actor_kind", entry).Scan(&sqlKind)
		goOK := slices.Contains(engine.ActorKinds(), kind)
		if (sqlErr == nil) != goOK {
			t.Errorf("kind %q: SQL err %v, Go accepts %v", kind, sqlErr, goOK)
		}
	}
}
