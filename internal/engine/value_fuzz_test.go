package engine

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/ontology"
)

var fuzzColumns = []ontology.Column{
	{Kind: ontology.ValueText}, {Kind: ontology.ValueOther},
	{Kind: ontology.ValueInteger, Bits: 16}, {Kind: ontology.ValueInteger, Bits: 32}, {Kind: ontology.ValueInteger, Bits: 64},
	{Kind: ontology.ValueNumeric}, {Kind: ontology.ValueFloat, Bits: 32}, {Kind: ontology.ValueFloat, Bits: 64},
	{Kind: ontology.ValueBoolean}, {Kind: ontology.ValueTimestamptz}, {Kind: ontology.ValueTimestamp},
	{Kind: ontology.ValueDate}, {Kind: ontology.ValueUUID},
}

// FuzzColumnValue holds the value check to never panicking, and to
// binding only what its column's type holds: an accepted value is of the
// Go type its kind sends, within the type's range.
func FuzzColumnValue(f *testing.F) {
	for _, seed := range []string{`"x"`, `1`, `-32768`, `9223372036854775807`, `1e1000`, `"1e-1000"`, `3.4e38`, `true`,
		`"2024-05-01T12:00:00Z"`, `"2024-05-01T12:00:00.5"`, `"2024-05-01"`, `"123e4567-e89b-12d3-a456-426614174000"`, `null`, `{}`} {
		for i := range fuzzColumns {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		col := fuzzColumns[int(which)%len(fuzzColumns)]
		text, arg, issue := columnValue(col, "/v", json.RawMessage(raw))
		if issue != nil {
			if issue.Path != "/v" || issue.Message == "" {
				t.Fatalf("issue %+v", issue)
			}
			return
		}
		if utf8.RuneCountInString(text) > MaxValueLength || strings.ContainsRune(text, 0) {
			t.Fatalf("%s accepted %q", col.Kind, text)
		}
		ok := false
		switch a := arg.(type) {
		case string:
			switch col.Kind {
			case ontology.ValueText, ontology.ValueOther:
				ok = a == text
			case ontology.ValueNumeric:
				e, fits := exponent(a)
				ok = isJSONNumber(a) && fits && e >= -maxNumericExponent && e <= maxNumericExponent
			case ontology.ValueUUID:
				ok = len(a) == 36 && a == strings.ToLower(a)
			}
		case int64:
			lo, hi := integerRange(col.Bits)
			ok = col.Kind == ontology.ValueInteger && a >= lo && a <= hi
		case float32:
			ok = col.Kind == ontology.ValueFloat && col.Bits == 32 && !math.IsInf(float64(a), 0) && !math.IsNaN(float64(a))
		case float64:
			ok = col.Kind == ontology.ValueFloat && col.Bits == 64 && !math.IsInf(a, 0) && !math.IsNaN(a)
		case bool:
			ok = col.Kind == ontology.ValueBoolean
		case time.Time:
			ok = (col.Kind == ontology.ValueTimestamptz || col.Kind == ontology.ValueTimestamp || col.Kind == ontology.ValueDate) &&
				a.Year() >= 0 && a.Year() <= 10000
		}
		if !ok {
			t.Fatalf("%s (%d bits) accepted %q as %T %v", col.Kind, col.Bits, raw, arg, arg)
		}
	})
}
