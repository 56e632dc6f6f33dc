package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestNextCursorOpensForItsOwnList: every nextCursor a list answers opens
// for the very same list, so an agent can page to the end. A cursor
// carried its whole query (every filter value, base64 inside base64) and
// its sort value with HTML escapes (& as \u0026), and the list refused
// any cursor over 4096 characters: an `in` filter of 100 UUIDs — within
// the advertised limits — or a sort value of 600 ampersands made a
// nextCursor that its own next page refused as "not a cursor of this
// list".
func TestNextCursorOpensForItsOwnList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	page := func(t *testing.T, b *exampleBundle, object, args string) (int, string) {
		t.Helper()
		out := b.engine.List(ctx, agent("acme"), object, json.RawMessage(args))
		if out.Status != engine.StatusOK {
			t.Fatalf("List(%.80s…) = %s %v", args, out.Status, out.Issues)
		}
		var body struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(out.Data, &body); err != nil {
			t.Fatal(err)
		}
		return len(body.Items), body.NextCursor
	}
	walk := func(t *testing.T, b *exampleBundle, object, args string, want int) {
		t.Helper()
		seen, cursor := 0, ""
		for range 10 {
			a := args
			if cursor != "" {
				a = strings.TrimSuffix(args, "}") + `, "cursor": "` + cursor + `"}`
			}
			n, next := page(t, b, object, a)
			seen += n
			if cursor = next; cursor == "" {
				break
			}
		}
		if seen != want {
			t.Fatalf("paging saw %d rows, want %d", seen, want)
		}
	}

	t.Run("in filter of 100 values", func(t *testing.T) {
		t.Parallel()
		b := setupTyped(t)
		ids := []string{`"123e4567-e89b-12d3-a456-426614174000"`, `"00000000-0000-0000-0000-000000000002"`}
		for i := len(ids); i < engine.MaxInValues; i++ {
			ids = append(ids, fmt.Sprintf(`"00000000-0000-0000-0000-%012d"`, 1000+i))
		}
		walk(t, b, "thing", `{"filters": {"id": {"in": [`+strings.Join(ids, ", ")+`]}}, "limit": 1}`, 2)
	})
	t.Run("sort value with ampersands", func(t *testing.T) {
		t.Parallel()
		b := setupExample(t)
		if _, err := b.admin.Exec(ctx, `INSERT INTO products (org_id, sku, name, price_cents) VALUES ('acme', 'amp', $1, 1)`,
			"R"+strings.Repeat("&", 600)); err != nil {
			t.Fatal(err)
		}
		// By name: Anvil, R&&&…, Rocket skates; a page of two ends at R&&&….
		walk(t, b, "product", `{"sort": "name", "limit": 2}`, 3)
	})
}
