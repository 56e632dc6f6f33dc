package sqlguard_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/orangerail/orangerail/internal/sqlguard"
)

func TestAssignments(t *testing.T) {
	c := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		sql  string
		want []sqlguard.Assignment
	}{
		{"UPDATE orders SET status = 'cancelled' WHERE id = $1", []sqlguard.Assignment{{Column: "status", Const: c(`"cancelled"`)}}},
		{"UPDATE orders SET shipping_address = $1, n = $2::int, x = NULL, y = 2, z = 1.50, b = true WHERE id = $3",
			[]sqlguard.Assignment{{Column: "shipping_address", Param: 1}, {Column: "n", Param: 2}, {Column: "x", Const: c("null")},
				{Column: "y", Const: c("2")}, {Column: "z", Const: c(`"1.50"`)}, {Column: "b", Const: c("true")}}},
		{"INSERT INTO notes (order_id, body) VALUES ($1, $2)", []sqlguard.Assignment{{Column: "order_id", Param: 1}, {Column: "body", Param: 2}}},
	}
	for _, tc := range cases {
		got, ok := sqlguard.Assignments(tc.sql)
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v %v, want %+v", tc.sql, got, ok, tc.want)
		}
	}
	for _, sql := range []string{
		"UPDATE orders SET total = total + $1 WHERE id = $2", // computed when it runs
		"UPDATE orders SET (a, b) = ($1, $2)",
		"INSERT INTO notes (a) VALUES ($1), ($2)",
		"INSERT INTO notes (a) VALUES ($1) ON CONFLICT DO NOTHING",
		"INSERT INTO notes SELECT * FROM x",
		"DELETE FROM orders WHERE id = $1",
		"SELECT 1; SELECT 2",
		"not sql",
	} {
		if got, ok := sqlguard.Assignments(sql); ok {
			t.Errorf("%s: got %+v, want not computable", sql, got)
		}
	}
}
