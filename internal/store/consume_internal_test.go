package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// TestConsumedIsAnApproval: the consume's row is an approval's row and
// whether it was decided, and consumedOf keeps every column of it — a
// column added to orangerail.approvals and not copied fails here.
func TestConsumedIsAnApproval(t *testing.T) {
	approval, consumed := reflect.TypeFor[db.OrangerailApproval](), reflect.TypeFor[db.ApprovalConsumeRow]()
	if consumed.NumField() != approval.NumField()+1 || consumed.Field(approval.NumField()).Name != "Decided" {
		t.Fatalf("the consume's row has %d fields, want an approval's %d and Decided", consumed.NumField(), approval.NumField())
	}
	row := &db.ApprovalConsumeRow{}
	v := reflect.ValueOf(row).Elem()
	for i := range approval.NumField() {
		f := approval.Field(i)
		if g := consumed.Field(i); g.Name != f.Name || g.Type != f.Type {
			t.Fatalf("field %d: the consume's row has %s %s, an approval %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
		v.Field(i).Set(distinct(t, f.Type, i))
	}
	want := &db.OrangerailApproval{}
	w := reflect.ValueOf(want).Elem()
	for i := range approval.NumField() {
		w.Field(i).Set(v.Field(i))
	}
	if got := consumedOf(row); !reflect.DeepEqual(got, approvalOf(want)) {
		t.Fatalf("consumedOf = %+v, want %+v", got, approvalOf(want))
	}
}

// distinct is a value of type typ, not its zero, told apart by i.
func distinct(t *testing.T, typ reflect.Type, i int) reflect.Value {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
	s := string(rune('a' + i))
	var v any
	switch typ {
	case reflect.TypeFor[uuid.UUID]():
		v = uuid.UUID{byte(i + 1)}
	case reflect.TypeFor[string]():
		v = s
	case reflect.TypeFor[*string]():
		v = &s
	case reflect.TypeFor[[]byte]():
		v = []byte{byte(i + 1)}
	case reflect.TypeFor[time.Time]():
		v = at
	case reflect.TypeFor[*time.Time]():
		v = &at
	default:
		t.Fatalf("no distinct value of %s", typ)
	}
	return reflect.ValueOf(v)
}
