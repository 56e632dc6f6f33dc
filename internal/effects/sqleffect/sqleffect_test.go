package sqleffect_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/orangerail/orangerail/internal/effects/sqleffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

func sqlAction(sql string) *ontology.Action {
	return &ontology.Action{Execute: ontology.Execute{SQL: sql}}
}

// TestRun: parameters bind by name from the input, each JSON kind as
// Postgres parses it; the result counts every row and carries at most
// MaxReturnedRows of them, with values JSON cannot spell as text.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	effect, err := sqleffect.New("a", sqlAction(
		"SELECT g AS n, :s::text AS s, :flag::boolean AS flag, :missing::text IS NULL AS missing, 'NaN'::float8 AS nan FROM generate_series(1, :count::int) g"))
	if err != nil {
		t.Fatal(err)
	}
	if !effect.Transactional() {
		t.Fatal("a statement's effect is not transactional")
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := effect.Run(ctx, &engine.EffectCall{Tx: tx, Input: json.RawMessage(`{"count":150,"flag":true,"s":"it's"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		RowsAffected int64            `json:"rows_affected"`
		Rows         []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(res.Data, &data); err != nil {
		t.Fatal(err)
	}
	if res.RowsAffected != 150 || data.RowsAffected != 150 || len(data.Rows) != sqleffect.MaxReturnedRows {
		t.Fatalf("rows affected %d (%d in the result), %d rows returned", res.RowsAffected, data.RowsAffected, len(data.Rows))
	}
	if row := data.Rows[0]; row["n"] != 1.0 || row["s"] != "it's" || row["flag"] != true || row["missing"] != true || row["nan"] != "NaN" {
		t.Fatalf("first row %v", row)
	}
}

// TestRefusals: the effect is made only of a sql execute, and runs only in
// a transaction; a statement Postgres refuses is the caller's error.
func TestRefusals(t *testing.T) {
	t.Parallel()
	if _, err := sqleffect.New("a", &ontology.Action{Execute: ontology.Execute{NotImplemented: true}}); err == nil {
		t.Error("an effect was made of a not_implemented execute")
	}
	if _, err := sqleffect.New("a", sqlAction("SELECT 'unterminated")); err == nil {
		t.Error("an effect was made of a statement that does not bind")
	}
	effect, err := sqleffect.New("a", sqlAction("SELECT 1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := effect.Run(context.Background(), &engine.EffectCall{Input: json.RawMessage(`{}`)}); err == nil {
		t.Error("ran without a transaction")
	}
	ctx := context.Background()
	tx, err := testdb.Pool(t, testdb.New(t)).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	broken, err := sqleffect.New("a", sqlAction("SELECT * FROM no_such_table"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Run(ctx, &engine.EffectCall{Tx: tx, Input: json.RawMessage(`{}`)}); err == nil || engine.IsOutcomeUnknown(err) {
		t.Errorf("a refused statement: %v", err)
	}
}
