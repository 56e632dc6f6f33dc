package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// Limits on read inputs.
const (
	// ListLimitDefault is a list's page size when the caller names none
	// (or the object's max_limit, when smaller).
	ListLimitDefault = 25
	// MaxInValues bounds the values of one `in` filter.
	MaxInValues = 100
	// MaxValueLength bounds a filter value or key, in characters (the
	// decoded string's, a number's or a boolean's text): the maxLength
	// every value's schema advertises.
	MaxValueLength = 1024
	// maxValueToken bounds a value's JSON text before it is decoded: a
	// character is at most 12 bytes of it (a surrogate pair escaped).
	maxValueToken = 12*MaxValueLength + 2
)

// sqlOps spells each filter operator in SQL.
var sqlOps = map[ontology.FilterOp]string{
	ontology.FilterEq: "=", ontology.FilterNe: "<>",
	ontology.FilterGt: ">", ontology.FilterGte: ">=",
	ontology.FilterLt: "<", ontology.FilterLte: "<=",
}

// quote quotes one identifier.
func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// qualified names an object's column by its table: in an ORDER BY, a bare
// name would mean the select list's column of that name, which
// readColumns may have cast to text.
func qualified(o *ontology.Object, column string) string {
	return o.QuotedTable() + "." + quote(column)
}

// getInput is the input of an object's get: its key, by the key field's
// own name, checked against the key column's type, and links to include.
type getInput struct {
	key     any
	include []string
}

// Get reads one row of an object by key, scoped to the caller's tenant.
// args is the tool input: {"<key field>": value, "include": [link names]}.
func (e *Engine) Get(ctx context.Context, caller *Caller, object string, args json.RawMessage) (out *Outcome) {
	ctx = e.observe(ctx)
	ctx = e.begin(ctx, OpGet, object)
	defer e.settle(ctx, OpGet, object, caller, time.Now(), &out)
	o, ok := e.cfg.Objects[object]
	if !ok {
		return &Outcome{Status: StatusNotFound, Code: errcode.MCPToolUnknown}
	}
	if out := e.Admit(ctx, caller, ontology.GetTool(object)); out != nil {
		return out
	}
	if e.beforeRead != nil {
		e.beforeRead()
	}
	if issues := e.checkReadInput(ontology.GetTool(object), args); issues != nil {
		return &Outcome{Status: StatusInvalidInput, Issues: issues}
	}
	in, issues := e.parseGetInput(caller, object, o, args)
	if len(issues) > 0 {
		return &Outcome{Status: StatusInvalidInput, Issues: issues}
	}
	var row json.RawMessage
	links := map[string]any{}
	var cut []string // the to-many links with more rows than they show
	var err error
	if len(in.include) == 0 {
		// The common read: one statement, its transaction in one round trip.
		row, err = readRow(ctx, e.datasource, caller.Tenant, e.reads[object].get, in.key)
	} else {
		err = database.InTenant(ctx, e.datasource, caller.Tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			database.Repeatable(tx)
			clear(links) // of a first try whose connection died
			cut = cut[:0]
			var err error
			if row, err = fetchRow(ctx, tx, o, e.readColumns(object), caller.Tenant, o.Key, in.key, false); err != nil || row == nil {
				return err
			}
			for _, name := range in.include {
				var more bool
				if links[name], more, err = e.fetchLink(ctx, tx, caller, object, name, row); err != nil {
					return err
				}
				if more {
					cut = append(cut, name)
				}
			}
			return nil
		})
	}
	if out := e.readFailure(ctx, "get "+object, err, o.Key); out != nil {
		return out
	}
	if row == nil {
		return &Outcome{Status: StatusNotFound}
	}
	if len(in.include) > 0 {
		answer := map[string]any{"item": row, "links": links}
		if len(cut) > 0 {
			answer["linksCut"] = cut
		}
		body, err := json.Marshal(answer)
		if err != nil {
			return e.internal(ctx, "get "+object, err)
		}
		return &Outcome{Status: StatusOK, Data: body}
	}
	body, _ := json.Marshal(map[string]json.RawMessage{"item": row})
	return &Outcome{Status: StatusOK, Data: body}
}

// parseGetInput reads a get's input for caller, who may include the
// links whose other end it sees (LinksSeen): a link to an object it cannot
// see is refused as one that does not exist, named nowhere.
func (e *Engine) parseGetInput(caller *Caller, object string, o *ontology.Object, args json.RawMessage) (getInput, []Issue) {
	var raw map[string]json.RawMessage
	if issues := decodeObject(args, &raw); issues != nil {
		return getInput{}, issues
	}
	var in getInput
	var issues []Issue
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v := raw[name]
		switch name {
		case o.Key:
			_, key, issue := e.bindValue(object, name, "/"+name, v)
			if issue != nil {
				issues = append(issues, *issue)
			}
			in.key = key
		case "include":
			if err := json.Unmarshal(v, &in.include); err != nil {
				issues = append(issues, Issue{Path: "/include", Message: "must be an array of link names"})
				continue
			}
			includable := e.LinksSeen(object, func(tool string) bool { return e.Sees(caller, tool) })
			for i, l := range in.include {
				switch {
				case !slices.Contains(includable, l):
					issues = append(issues, Issue{Path: fmt.Sprintf("/include/%d", i), Message: fmt.Sprintf("%q is not a link of %s (it includes %s)", display.Echo(l), object, orNone(includable))})
				case slices.Index(in.include, l) < i:
					issues = append(issues, Issue{Path: fmt.Sprintf("/include/%d", i), Message: "listed twice"})
				}
				if len(issues) > 0 {
					break // one bad entry is enough: the list may be long
				}
			}
		default:
			issues = append(issues, Issue{Path: "/" + escapePointer(display.Echo(name)), Message: "unknown property"})
		}
	}
	if _, ok := raw[o.Key]; !ok {
		issues = append(issues, Issue{Path: "/" + o.Key, Message: "required"})
	}
	return in, issues
}

// orNone is names, comma-separated, or "none".
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// linkTouches reports whether the named link starts or ends at object.
func (e *Engine) linkTouches(link, object string) bool {
	l, ok := e.cfg.Links[link]
	if !ok {
		return false
	}
	from, _, _ := strings.Cut(l.From, ".")
	to, _, _ := strings.Cut(l.To, ".")
	return from == object || to == object
}

// fetchLink reads the rows a link reaches from row: the one row it points
// to, from the link's from side, or the rows pointing at row (the first
// max_limit of the linked object, by its key), from its to side — more
// says there are others, which a list of that object pages through. A
// linked object the caller may not read (mayFollow) is withheld, not an
// error.
func (e *Engine) fetchLink(ctx context.Context, tx pgx.Tx, caller *Caller, object, name string, row json.RawMessage) (links any, more bool, err error) {
	l := e.cfg.Links[name]
	fromObj, fromField, _ := strings.Cut(l.From, ".")
	toObj, toField, _ := strings.Cut(l.To, ".")
	hereField, there, thereField, many := fromField, toObj, toField, false
	if fromObj != object {
		hereField, there, thereField, many = toField, fromObj, fromField, true
	}
	target := e.cfg.Objects[there]
	if !e.mayFollow(caller, there, many) {
		return map[string]string{"withheld": "the caller may not read " + there}, false, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(row, &fields); err != nil {
		return nil, false, err
	}
	value, issue := scalarText("", fields[hereField])
	if issue != nil || bytes.Equal(fields[hereField], []byte("null")) {
		return nil, false, nil
	}
	if !many {
		one, err := fetchRow(ctx, tx, target, e.readColumns(there), caller.Tenant, thereField, value, false) // no row encodes as null
		return one, false, err
	}
	sql := fmt.Sprintf("SELECT row_to_json(r)::text FROM (SELECT %s FROM %s WHERE %s = $1 AND %s = $2 ORDER BY %s LIMIT %d) r",
		e.readColumns(there), target.QuotedTable(), quote(target.TenantColumn), quote(thereField), qualified(target, target.Key), target.List.MaxLimit+1)
	rows, err := tx.Query(ctx, sql, caller.Tenant, value)
	if err != nil {
		return nil, false, err
	}
	items, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, err
	}
	if more = len(items) > target.List.MaxLimit; more {
		items = items[:target.List.MaxLimit]
	}
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = json.RawMessage(it)
	}
	return out, more, nil
}

// selectList selects an object's fields as they are: what an action's
// target is, for its precondition and its approval.
func selectList(o *ontology.Object) string {
	cols := make([]string, len(o.Fields))
	for i, f := range o.Fields {
		cols[i] = quote(f)
	}
	return strings.Join(cols, ", ")
}

// readSQL is an object's read statements, made once, in New: the
// ontology and the catalog they are made of do not change while the
// engine runs.
type readSQL struct {
	// columns is the select list of its reads (columnsOf).
	columns string
	// get selects its row by key, in a tenant (rowSQL).
	get string
}

// readStatements makes every object's readSQL.
func (e *Engine) readStatements() map[string]readSQL {
	reads := make(map[string]readSQL, len(e.cfg.Objects))
	for name, o := range e.cfg.Objects {
		cols := e.columnsOf(name, o)
		reads[name] = readSQL{columns: cols, get: rowSQL(o, cols, o.Key, false)}
	}
	return reads
}

// readColumns is the select list of an object's reads (columnsOf), made
// once.
func (e *Engine) readColumns(object string) string { return e.reads[object].columns }

// columnsOf selects an object's fields as reads return them: a numeric
// as its text, which row_to_json then writes as a string, so that a value
// with more digits than a double holds reaches the agent whole (the read's
// output schema says so: fieldSchema).
func (e *Engine) columnsOf(object string, o *ontology.Object) string {
	cols := make([]string, len(o.Fields))
	for i, f := range o.Fields {
		cols[i] = quote(f)
		if col, ok := e.column(object, f); ok && col.Kind == ontology.ValueNumeric {
			cols[i] = quote(f) + "::text AS " + quote(f)
		}
	}
	return strings.Join(cols, ", ")
}

// rowSQL selects the object's row whose column equals $2 in tenant $1, as
// a JSON object of the columns cols selects (selectList or readColumns);
// forUpdate locks it until the transaction ends.
func rowSQL(o *ontology.Object, cols, column string, forUpdate bool) string {
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	return fmt.Sprintf("SELECT row_to_json(r)::text FROM (SELECT %s FROM %s WHERE %s = $1 AND %s = $2 LIMIT 2%s) r",
		cols, o.QuotedTable(), quote(o.TenantColumn), quote(column), lock)
}

// fetchRow reads the object's row whose column equals value in the tenant;
// nil when there is none. value is text Postgres parses as the column's
// type, or a value of a Go type that encodes as it.
func fetchRow(ctx context.Context, tx pgx.Tx, o *ontology.Object, cols, tenant, column string, value any, forUpdate bool) (json.RawMessage, error) {
	rows, err := tx.Query(ctx, rowSQL(o, cols, column, forUpdate), tenant, value)
	if err != nil {
		return nil, err
	}
	return firstRow(rows)
}

// readRow reads the row of sql (a rowSQL) whose key is key in tenant, in
// a read-only transaction of its own sent in one round trip
// (database.QueryInTenant); nil when there is none.
func readRow(ctx context.Context, pool database.Acquirer, tenant, sql string, key any) (json.RawMessage, error) {
	var row json.RawMessage
	err := database.QueryInTenant(ctx, pool, tenant, sql, []any{tenant, key}, func(rows pgx.Rows) (err error) {
		row, err = firstRow(rows)
		return err
	})
	return row, err
}

// errKeyNotUnique is a key that names more than one row of its tenant:
// nothing at load can hold an object's key unique (a view, a column with
// no unique index), so each read asks for two rows and refuses a second.
// Judged by one of them, a precondition would pass an effect that acts on
// every row the key names.
var errKeyNotUnique = errors.New("the object's key names more than one row of the tenant: an object's key must name one row (a primary key, or a unique column)")

// firstRow returns the one row's JSON text; nil when there is none, and
// errKeyNotUnique when there are more (rowSQL reads two).
func firstRow(rows pgx.Rows) (json.RawMessage, error) {
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	switch {
	case err != nil || len(found) == 0:
		return nil, err
	case len(found) > 1:
		return nil, errKeyNotUnique
	}
	return json.RawMessage(found[0]), nil
}

// readFailure turns a read's error into an outcome: a value the column's
// type cannot hold is the caller's mistake; anything else is a
// resolve_error whose text is kept for operators.
func (e *Engine) readFailure(ctx context.Context, op string, err error, valueField string) *Outcome {
	if err == nil {
		return nil
	}
	if errors.Is(store.InterpretError(err), store.ErrInvalidValue) { // a value of the wrong form
		return &Outcome{Status: StatusInvalidInput, Issues: []Issue{{Path: "/" + valueField, Message: "not a valid value for this field"}}}
	}
	return e.failure(ctx, op, &Outcome{Status: StatusResolveError, CorrelationID: uuid.NewString(), Diagnostic: classify(err), Err: err})
}

func (e *Engine) internal(ctx context.Context, op string, err error) *Outcome {
	return e.failure(ctx, op, &Outcome{Status: StatusInternalError, CorrelationID: uuid.NewString(), Err: err})
}

// decodeObject decodes a JSON object of inputs, or says why it cannot.
func decodeObject(args json.RawMessage, dst *map[string]json.RawMessage) []Issue {
	if len(bytes.TrimSpace(args)) == 0 {
		*dst = map[string]json.RawMessage{}
		return nil
	}
	if err := json.Unmarshal(args, dst); err != nil || *dst == nil {
		return []Issue{{Path: "", Message: "the input must be a JSON object"}}
	}
	return nil
}

// scalarText returns a JSON string, number or boolean as the text Postgres
// parses into the column's own type.
func scalarText(path string, v json.RawMessage) (string, *Issue) {
	v = bytes.TrimSpace(v)
	if len(v) > maxValueToken {
		return "", tooLong(path)
	}
	switch {
	case len(v) > 0 && v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", &Issue{Path: path, Message: "not a valid string"}
		}
		if strings.ContainsRune(s, 0) {
			return "", &Issue{Path: path, Message: "contains a NUL character"}
		}
		if utf8.RuneCountInString(s) > MaxValueLength {
			return "", tooLong(path)
		}
		return s, nil
	case string(v) == "true" || string(v) == "false":
		return string(v), nil
	case len(v) > MaxValueLength:
		return "", tooLong(path)
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		if _, err := strconv.ParseFloat(string(v), 64); err != nil || !json.Valid(v) {
			return "", &Issue{Path: path, Message: "not a valid number"}
		}
		return string(v), nil
	}
	return "", &Issue{Path: path, Message: "must be a string, number or boolean"}
}

// tooLong is the issue of a value at path longer than MaxValueLength.
func tooLong(path string) *Issue {
	return &Issue{Path: path, Message: fmt.Sprintf("longer than %d characters", MaxValueLength)}
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
