package ontology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestBindSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, out string
		names   []string
	}{
		{"UPDATE t SET a = :a WHERE id = :id", "UPDATE t SET a = $1 WHERE id = $2", []string{"a", "id"}},
		{"SELECT :x, :x, :y", "SELECT $1, $1, $2", []string{"x", "y"}},
		{"SELECT now()::text, :a::int", "SELECT now()::text, $1::int", []string{"a"}},
		{"SELECT ':not' , \"col:umn\", :a", "SELECT ':not' , \"col:umn\", $1", []string{"a"}},
		{"SELECT 'it''s :no', :a", "SELECT 'it''s :no', $1", []string{"a"}},
		{"SELECT E'\\' :no', :a", "SELECT E'\\' :no', $1", []string{"a"}},
		{"SELECT 1 -- :no\n, :a", "SELECT 1 -- :no\n, $1", []string{"a"}},
		{"SELECT /* :no /* nested :no */ */ :a", "SELECT /* :no /* nested :no */ */ $1", []string{"a"}},
		{"SELECT $tag$ :no $tag$, $$ :no $$, :a", "SELECT $tag$ :no $tag$, $$ :no $$, $1", []string{"a"}},
		{"SELECT arr[1:2], :a", "SELECT arr[1:2], $1", []string{"a"}},
	}
	for _, tt := range tests {
		out, names, err := BindSQL(tt.in)
		if err != nil || out != tt.out || !slices.Equal(names, tt.names) {
			t.Errorf("BindSQL(%q) = %q, %v, %v; want %q, %v", tt.in, out, names, err, tt.out, tt.names)
		}
	}
	for _, bad := range []string{"SELECT 'open", "SELECT \"open", "SELECT /* open", "SELECT $a$ open"} {
		if _, _, err := BindSQL(bad); err == nil {
			t.Errorf("BindSQL(%q) accepted", bad)
		}
	}
}

// FuzzBindSQL holds the parameter rewriter to never panicking and to
// numbering every name it returns.
func FuzzBindSQL(f *testing.F) {
	for _, seed := range []string{"SELECT :a, :b::int", "SELECT ':x' -- :y\n, $t$ :z $t$", "/* :a */ :b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		out, names, err := BindSQL(sql)
		if err != nil {
			return
		}
		for i := range names {
			if !strings.Contains(out, fmt.Sprintf("$%d", i+1)) {
				t.Fatalf("%q: name %d has no $%d in %q", sql, i, i+1, out)
			}
		}
	})
}
