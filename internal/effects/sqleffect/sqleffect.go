// Package sqleffect is the effect of an action declared execute: {sql: …}:
// one statement, its :name parameters bound from the call's input, run in
// the datasource transaction that holds the target's row lock. It is
// transactional: the statement commits or rolls back with the audit
// records around it where the datasource is the service database, and
// with the datasource's transaction otherwise (engine.Effect).
package sqleffect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// MaxReturnedRows bounds the RETURNING rows an execution result carries.
const MaxReturnedRows = 100

// Effect runs one action's statement. It is safe for concurrent use: it
// holds only the statement, bound once.
type Effect struct {
	sql   string   // the statement, its :name parameters rewritten to $1, $2 …
	names []string // the input property each $n binds, in order
}

// New makes the effect of an action declared execute: {sql: …}; it is an
// engine.EffectFactory.
func New(_ string, a *ontology.Action) (engine.Effect, error) {
	if a.Execute.Kind() != ontology.ExecuteSQL {
		return nil, fmt.Errorf("sqleffect: the action's execute is of kind %q, not sql", a.Execute.Kind())
	}
	sql, names, err := ontology.BindSQL(a.Execute.SQL)
	if err != nil {
		return nil, err
	}
	return &Effect{sql: sql, names: names}, nil
}

// Transactional reports true: the statement runs in the call's
// transaction.
func (*Effect) Transactional() bool { return true }

// ResultSchema describes what Run returns: the rows a RETURNING clause
// gives, each an object of its columns (their types are the statement's).
func (*Effect) ResultSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"rows_affected", "rows"}, "additionalProperties": false,
		"properties": map[string]any{
			"rows_affected": map[string]any{"type": "integer", "minimum": 0, "description": "How many rows the statement changed."},
			"rows": map[string]any{"type": "array", "maxItems": MaxReturnedRows, "items": map[string]any{"type": "object"},
				"description": fmt.Sprintf("The rows its RETURNING clause gave, at most %d.", MaxReturnedRows)},
		}}
}

// Run runs the statement in call.Tx and returns
// {"rows_affected": n, "rows": [...]}, at most MaxReturnedRows of the rows
// it returned. Its outcome is always known: nothing is committed here.
func (x *Effect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	if call.Tx == nil {
		return engine.EffectResult{}, errors.New("sqleffect: no transaction to run the statement in")
	}
	var input map[string]json.RawMessage
	if err := json.Unmarshal(call.Input, &input); err != nil {
		return engine.EffectResult{}, err
	}
	args := make([]any, len(x.names))
	for i, name := range x.names {
		args[i] = paramValue(input[name])
	}
	rows, err := call.Tx.Query(ctx, x.sql, args...)
	if err != nil {
		return engine.EffectResult{}, err
	}
	defer rows.Close()
	returned := []map[string]any{}
	fields := rows.FieldDescriptions()
	for rows.Next() {
		if len(returned) == MaxReturnedRows {
			continue
		}
		values, err := rows.Values()
		if err != nil {
			return engine.EffectResult{}, err
		}
		row := make(map[string]any, len(fields))
		for i, f := range fields {
			row[f.Name] = jsonValue(values[i])
		}
		returned = append(returned, row)
	}
	if err := rows.Err(); err != nil {
		return engine.EffectResult{}, err
	}
	affected := rows.CommandTag().RowsAffected()
	data, err := json.Marshal(map[string]any{"rows_affected": affected, "rows": returned})
	if err != nil {
		return engine.EffectResult{}, err
	}
	return engine.EffectResult{Data: data, RowsAffected: affected}, nil
}

// jsonValue makes a returned value encodable: a float JSON cannot spell
// (NaN, ±Inf) becomes its text. Exactness of large numbers is kept by the
// audit record's canonical form.
func jsonValue(v any) any {
	switch f := v.(type) {
	case float64:
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case float32:
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
	}
	return v
}

// paramValue passes a JSON input value to Postgres as text it parses into
// the parameter's own type: a string as itself, a number or boolean as its
// literal, an object or array as JSON, null or absent as NULL.
func paramValue(v json.RawMessage) any {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return nil
	case v[0] == '"':
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	}
	return string(v)
}
