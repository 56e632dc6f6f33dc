package mcp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/sqlquery"
)

// TestReadableIsBounded: sql_query's description lists at most
// maxDescribedTables relations of at most maxDescribedColumns columns
// each, and says how many more there are.
func TestReadableIsBounded(t *testing.T) {
	t.Parallel()
	var tables []sqlquery.Table
	for i := range maxDescribedTables + 5 {
		table := sqlquery.Table{Schema: "s", Name: fmt.Sprintf("t%d", i)}
		for j := range maxDescribedColumns + 3 {
			table.Columns = append(table.Columns, sqlquery.Column{Name: fmt.Sprintf("c%d", j), Type: "int8"})
		}
		tables = append(tables, table)
	}
	d := readable(tables)
	last := fmt.Sprintf("s.t%d(", maxDescribedTables-1)
	if !strings.Contains(d, last) || strings.Contains(d, fmt.Sprintf("s.t%d(", maxDescribedTables)) || !strings.HasSuffix(d, "; and 5 more relations.") {
		t.Errorf("relations past the bound: %s", d[max(0, len(d)-200):])
	}
	if n := strings.Count(d, ", and 3 more columns)"); n != maxDescribedTables {
		t.Errorf("%d relations say how many columns are left out, want %d", n, maxDescribedTables)
	}
	if strings.Contains(d, fmt.Sprintf("c%d int8", maxDescribedColumns)) {
		t.Error("a column past the bound is listed")
	}
	if d := readable(tables[:1]); !strings.HasPrefix(d, "It may read (relation(column type, …)): s.t0(c0 int8, c1 int8,") || strings.Contains(d, "more relations") {
		t.Errorf("one relation: %s", d)
	}
	if d := readable(nil); d != "It may read no relation." {
		t.Errorf("none: %s", d)
	}
}
