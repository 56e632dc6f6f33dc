package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
)

// listInput is a checked list request.
type listInput struct {
	filters []filter
	sort    string // a field; "" sorts by the key alone
	desc    bool
	limit   int
	after   *cursor
	// query binds the cursor to these filters and this sort order.
	query []byte
}

type filter struct {
	field string
	op    ontology.FilterOp
	// values are the values as the agent wrote them, which a cursor binds;
	// args are the same values checked against the column's type, which
	// the statement binds.
	values []string
	args   []any
}

// cursor is where the previous page ended. It travels to the agent signed,
// so an agent can hand it back but not forge or alter it.
type cursor struct {
	Query   []byte  `json:"q"`
	SortVal *string `json:"s,omitempty"` // the last row's sort value; nil when NULL or sorting by key
	Key     string  `json:"k"`
}

// List reads a page of an object's rows in the caller's tenant. args is the
// tool input: {"filters": {field: {op: value}}, "sort": "field" | "-field",
// "limit": n, "cursor": "…"}, every part optional and whitelisted by the
// object's list spec.
func (e *Engine) List(ctx context.Context, caller *Caller, object string, args json.RawMessage) (out *Outcome) {
	ctx = e.observe(ctx)
	ctx = e.begin(ctx, OpList, object)
	defer e.settle(ctx, OpList, object, caller, time.Now(), &out)
	o, ok := e.cfg.Objects[object]
	if !ok {
		return &Outcome{Status: StatusNotFound, Code: errcode.MCPToolUnknown}
	}
	if out := e.Admit(ctx, caller, ontology.ListTool(object)); out != nil {
		return out
	}
	if issues := e.checkReadInput(ontology.ListTool(object), args); issues != nil {
		return &Outcome{Status: StatusInvalidInput, Issues: issues}
	}
	in, issues := e.parseListInput(caller, object, o, args)
	if len(issues) > 0 {
		return &Outcome{Status: StatusInvalidInput, Issues: issues}
	}

	sql, params := listSQL(o, e.readColumns(object), caller.Tenant, in)
	type page struct {
		row       string
		sort, key *string
	}
	var rows []page
	err := database.QueryInTenant(ctx, e.datasource, caller.Tenant, sql, params, func(r pgx.Rows) error {
		var err error
		rows, err = pgx.CollectRows(r, func(row pgx.CollectableRow) (page, error) {
			var p page
			return p, row.Scan(&p.row, &p.sort, &p.key)
		})
		return err
	})
	if out := e.readFailure(ctx, "list "+object, err, "filters"); out != nil {
		return out
	}

	items := make([]json.RawMessage, 0, min(len(rows), in.limit))
	for _, r := range rows[:min(len(rows), in.limit)] {
		items = append(items, json.RawMessage(r.row))
	}
	result := map[string]any{"items": items}
	if len(rows) > in.limit {
		last := rows[in.limit-1]
		next, err := e.sealCursor(caller.Tenant, object, &cursor{Query: queryDigest(in.query), SortVal: last.sort, Key: deref(last.key)})
		if err != nil {
			return e.internal(ctx, "list "+object, err)
		}
		result["nextCursor"] = next
	}
	body, err := json.Marshal(result)
	if err != nil {
		return e.internal(ctx, "list "+object, err)
	}
	return &Outcome{Status: StatusOK, Data: body}
}

// listSQL builds a list's statement, selecting cols (readColumns). Every
// identifier comes from the ontology and is quoted; every value is a
// parameter.
func listSQL(o *ontology.Object, cols, tenant string, in listInput) (string, []any) {
	params := []any{tenant}
	param := func(v any) string {
		params = append(params, v)
		return fmt.Sprintf("$%d", len(params))
	}
	where := []string{quote(o.TenantColumn) + " = $1"}
	for _, f := range in.filters {
		col := quote(f.field)
		if f.op == ontology.FilterIn {
			ph := make([]string, len(f.args))
			for i, v := range f.args {
				ph[i] = param(v)
			}
			where = append(where, fmt.Sprintf("%s IN (%s)", col, strings.Join(ph, ", ")))
			continue
		}
		where = append(where, fmt.Sprintf("%s %s %s", col, sqlOps[f.op], param(f.args[0])))
	}

	key := quote(o.Key)
	order := qualified(o, o.Key)
	sortExpr := "NULL::text"
	if in.sort != "" {
		dir := "ASC"
		if in.desc {
			dir = "DESC"
		}
		// NULLs sort last either way; the key breaks ties, ascending.
		order = fmt.Sprintf("%s %s NULLS LAST, %s", qualified(o, in.sort), dir, qualified(o, o.Key))
		sortExpr = "r." + quote(in.sort) + "::text"
	}
	if c := in.after; c != nil {
		k := param(c.Key)
		switch {
		case in.sort == "":
			where = append(where, fmt.Sprintf("%s > %s", key, k))
		case c.SortVal == nil:
			where = append(where, fmt.Sprintf("(%s IS NULL AND %s > %s)", quote(in.sort), key, k))
		default:
			col, cmp := quote(in.sort), ">"
			if in.desc {
				cmp = "<"
			}
			s := param(*c.SortVal)
			where = append(where, fmt.Sprintf("(%s %s %s OR (%s = %s AND %s > %s) OR %s IS NULL)", col, cmp, s, col, s, key, k, col))
		}
	}
	sql := fmt.Sprintf(`SELECT row_to_json(r)::text, %s, r.%s::text FROM (SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT %d) r`,
		sortExpr, key, cols, o.QuotedTable(), strings.Join(where, " AND "), order, in.limit+1)
	return sql, params
}

func (e *Engine) parseListInput(caller *Caller, object string, o *ontology.Object, args json.RawMessage) (listInput, []Issue) {
	in := listInput{limit: min(ListLimitDefault, o.List.MaxLimit)}
	var raw map[string]json.RawMessage
	if issues := decodeObject(args, &raw); issues != nil {
		return in, issues
	}
	var issues []Issue
	bad := func(path, format string, args ...any) {
		issues = append(issues, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	var cursorText string
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v := raw[name]
		switch name {
		case "filters":
			var byField map[string]map[string]json.RawMessage
			if err := json.Unmarshal(v, &byField); err != nil {
				bad("/filters", "must be an object of {field: {operator: value}}")
				continue
			}
			for _, field := range slices.Sorted(maps.Keys(byField)) {
				ops, allowed := o.List.Filters[field]
				fpath := "/filters/" + escapePointer(display.Echo(field))
				if !allowed {
					bad(fpath, "%s cannot be filtered by this field", object)
					continue
				}
				for _, op := range slices.Sorted(maps.Keys(byField[field])) {
					in.filters, issues = e.appendFilter(in.filters, issues, object, fpath, field, ops, op, byField[field][op])
				}
			}
		case "sort":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				bad("/sort", "must be a field name, or -field for descending")
				continue
			}
			field := strings.TrimPrefix(s, "-")
			if !slices.Contains(o.List.Sort, field) {
				bad("/sort", "%s cannot be sorted by %q; it sorts by %s", object, display.Echo(field), strings.Join(o.List.Sort, ", "))
				continue
			}
			in.sort, in.desc = field, strings.HasPrefix(s, "-")
		case "limit":
			// A JSON integer, as the schema's type says: any number of no
			// fraction, however spelled (10, 10.0, 1e1).
			var f float64
			if err := json.Unmarshal(v, &f); err != nil || f < 1 || f != math.Trunc(f) {
				bad("/limit", "must be a whole number from 1")
				continue
			}
			in.limit = int(min(f, float64(o.List.MaxLimit))) // the schema refused a larger one already
		case "cursor":
			if err := json.Unmarshal(v, &cursorText); err != nil {
				bad("/cursor", "must be the nextCursor string of a previous page")
			}
		default:
			bad("/"+escapePointer(display.Echo(name)), "unknown property")
		}
	}
	if len(issues) > 0 {
		return in, issues
	}
	query, err := jcs.Marshal(map[string]any{"filters": in.filters, "sort": in.sort, "desc": in.desc})
	if err != nil {
		return in, []Issue{{Path: "", Message: "the request could not be encoded"}}
	}
	in.query = query
	if cursorText != "" {
		c, err := e.openCursor(caller.Tenant, object, cursorText)
		// A cursor binds its query by digest (one sealed before, by the
		// query itself): its length does not grow with the filters.
		if err != nil || !(bytes.Equal(c.Query, queryDigest(in.query)) || bytes.Equal(c.Query, in.query)) {
			return in, []Issue{{Path: "/cursor", Message: "not a cursor of this list with these filters and this sort order"}}
		}
		in.after = c
	}
	return in, nil
}

// appendFilter checks one filter of a list and appends it, or its issues.
// Each value is checked against its column's type here, so a value the
// column cannot hold never reaches Postgres.
func (e *Engine) appendFilter(filters []filter, issues []Issue, object, fpath, field string, allowed []ontology.FilterOp, op string, v json.RawMessage) ([]filter, []Issue) {
	opPath := fpath + "/" + escapePointer(display.Echo(op))
	if !slices.Contains(allowed, ontology.FilterOp(op)) {
		return filters, append(issues, Issue{Path: opPath, Message: fmt.Sprintf("operator not allowed on %s; allowed: %s", field, joinOps(allowed))})
	}
	f := filter{field: field, op: ontology.FilterOp(op)}
	if f.op == ontology.FilterIn {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil || len(list) == 0 || len(list) > MaxInValues {
			return filters, append(issues, Issue{Path: opPath, Message: fmt.Sprintf("must be an array of 1 to %d values", MaxInValues)})
		}
		for i, item := range list {
			s, arg, issue := e.bindValue(object, field, fmt.Sprintf("%s/%d", opPath, i), item)
			if issue != nil {
				issues = append(issues, *issue)
			}
			f.values, f.args = append(f.values, s), append(f.args, arg)
		}
		return append(filters, f), issues
	}
	s, arg, issue := e.bindValue(object, field, opPath, v)
	if issue != nil {
		return filters, append(issues, *issue)
	}
	f.values, f.args = []string{s}, []any{arg}
	return append(filters, f), issues
}

func joinOps(ops []ontology.FilterOp) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = string(op)
	}
	return strings.Join(s, ", ")
}

// MarshalJSON makes a filter part of a cursor's query binding.
func (f filter) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{f.field, f.op, f.values})
}

const cursorPurpose = "orangerail list cursor v1"

// maxCursorLength bounds a cursor's text; every cursor sealCursor makes is
// shorter (a sort value is a column's text, bounded by MaxValueLength).
const maxCursorLength = 4096

// sealCursor encodes and signs a cursor for one tenant's list of object,
// under the ring's active key: body.sig, prefixed kid. when the key
// carries a kid (a cursor made under the legacy key has the form cursors
// had before rings, so replicas not yet upgraded still open it).
func (e *Engine) sealCursor(tenant, object string, c *cursor) (string, error) {
	// Without HTML escapes: & < > as themselves, not six bytes each.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return "", err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sig, kid := e.mac(cursorPurpose, []byte(tenant), []byte(object), body)
	text := base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(sig[:16])
	if kid != "" {
		text = string(kid) + "." + text
	}
	return text, nil
}

// openCursor verifies and decodes a cursor sealed for this tenant and
// object, with the key its kid names (none: the legacy key): a cursor
// made before a rotation opens while the ring keeps its key.
func (e *Engine) openCursor(tenant, object, text string) (*cursor, error) {
	if len(text) > maxCursorLength {
		return nil, errBadCursor
	}
	var kid keyring.KID
	if parts := strings.Split(text, "."); len(parts) == 3 {
		kid, text = keyring.KID(parts[0]), parts[1]+"."+parts[2]
		if !kid.Valid() || keyring.Carried(kid) == "" {
			return nil, errBadCursor
		}
	}
	bodyText, sigText, ok := strings.Cut(text, ".")
	if !ok {
		return nil, errBadCursor
	}
	body, err1 := base64.RawURLEncoding.DecodeString(bodyText)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigText)
	if err1 != nil || err2 != nil {
		return nil, errBadCursor
	}
	want, known := e.macBy(kid, cursorPurpose, []byte(tenant), []byte(object), body)
	if !known || !hmac.Equal(sig, want[:16]) {
		return nil, errBadCursor
	}
	var c cursor
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errBadCursor
	}
	return &c, nil
}

var errBadCursor = fmt.Errorf("not a valid cursor")

// queryDigest is what a list's cursor binds of its query: its SHA-256.
func queryDigest(query []byte) []byte {
	sum := sha256.Sum256(query)
	return sum[:]
}
