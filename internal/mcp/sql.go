package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/sqlquery"
)

// The bounds of the catalog sql_query's description lists: every tools/list
// carries it, so a schema of very many relations, or of very wide ones, is
// listed in part, saying how many more there are.
const (
	maxDescribedTables  = 40
	maxDescribedColumns = 40
)

// sqlGuards are the layers a query's answer names, in order.
var sqlGuards = []any{sqlquery.GuardRole, sqlquery.GuardTransaction, sqlquery.GuardParse, sqlquery.GuardCatalog, sqlquery.GuardLimits}

// sqlTool declares sql_query: its description says what the query role may
// read (from the live catalog, as New read it) and how values come back;
// its output schema is the answer's, exactly (runSQL).
func sqlTool(q *sqlquery.Querier) *sdk.Tool {
	description := fmt.Sprintf("Run one read-only SELECT over your tenant's rows (schemas: %s, the only relations it may read; e.g. the audit log in audit, "+
		"its verifier audit_verify('TENANT')). At most %d rows and %d bytes come back, in %s; truncation is reported. "+
		"A row's long values share %d characters: a longer value comes back cut, as a string, listed in cutValues. "+
		"Columns come with their Postgres types; values by type: uuid, inet, enum, time as text; date YYYY-MM-DD; "+
		"timestamptz RFC 3339 in UTC (2024-05-01T10:00:00.5+00:00), timestamp without offset; interval ISO 8601 (P1Y2M3DT4H5M6.5S, each part signed); "+
		"numeric as an exact string; int8 a number, or a string where a double cannot hold it exactly (past 2^53); bytea lowercase hex without \\x; json as JSON; arrays element by element; "+
		"any other type its Postgres text. ",
		strings.Join(q.Schemas(), ", "), sqlquery.MaxRows, sqlquery.MaxBytes, sqlquery.Timeout, sqlquery.RowChars)
	return &sdk.Tool{
		Title:       "Read-only SQL",
		Description: description + readable(q.Tables()),
		InputSchema: map[string]any{"type": "object", "required": []string{"sql"}, "additionalProperties": false,
			"properties": map[string]any{"sql": map[string]any{"type": "string", "maxLength": sqlguard.MaxLength}}},
		OutputSchema: sqlOutputSchema(),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, Title: "Read-only SQL"},
	}
}

// readable lists the relations and columns a query may read, bounded.
func readable(tables []sqlquery.Table) string {
	if len(tables) == 0 {
		return "It may read no relation."
	}
	var b strings.Builder
	b.WriteString("It may read (relation(column type, …)): ")
	for i, t := range tables {
		if i == maxDescribedTables {
			fmt.Fprintf(&b, "; and %d more relations", len(tables)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t.Schema + "." + t.Name + "(")
		for j, c := range t.Columns {
			if j == maxDescribedColumns {
				fmt.Fprintf(&b, ", and %d more columns", len(t.Columns)-j)
				break
			}
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.Name + " " + c.Type)
		}
		b.WriteString(")")
	}
	b.WriteString(".")
	return b.String()
}

// sqlOutputSchema is the structured content of a sql_query answer that
// ran; a refusal travels as text (render, runSQL).
func sqlOutputSchema() map[string]any {
	count := func(maximum int) map[string]any {
		return map[string]any{"type": "integer", "minimum": 0, "maximum": maximum}
	}
	strict := func(required []string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "required": required, "additionalProperties": false, "properties": props}
	}
	return strict([]string{"columns", "rows", "rowCount", "guards", "bytes"}, map[string]any{
		"columns": map[string]any{"type": "array", "description": "Each column's name and Postgres type, in the rows' order.",
			"items": strict([]string{"name", "type"}, map[string]any{"name": map[string]any{"type": "string"}, "type": map[string]any{"type": "string"}})},
		"rows": map[string]any{"type": "array", "maxItems": sqlquery.MaxRows,
			"description": "Each row an array of its values, one per column, encoded by the column's type.", "items": map[string]any{"type": "array"}},
		"rowCount": count(sqlquery.MaxRows),
		"guards": map[string]any{"type": "array", "description": "The layers that engaged.",
			"items": map[string]any{"enum": sqlGuards}},
		"bytes":       count(sqlquery.MaxBytes),
		"truncatedBy": map[string]any{"enum": []string{"rows", "bytes"}, "description": "The limit that cut the answer short, when one did."},
		"cutValues": map[string]any{"type": "array", "description": "The values cut to their first cutChars characters, by row and column (from 0).",
			"items": strict([]string{"row", "column"}, map[string]any{"row": count(sqlquery.MaxRows - 1), "column": map[string]any{"type": "integer", "minimum": 0}})},
		"cutChars": map[string]any{"type": "integer", "minimum": 1, "maximum": sqlquery.RowChars},
	})
}

// sqlInput reads sql_query's input as its schema advertises it — an
// object of one member, "sql", a string without U+0000 — or the issues
// that refuse it, as every other tool's input is held to its schema.
func sqlInput(args json.RawMessage) (string, []engine.Issue) {
	var sql string
	issues := soleMember(args, "sql", "required: one SELECT statement", func(value json.RawMessage) string {
		switch {
		case value[0] != '"' || json.Unmarshal(value, &sql) != nil:
			return "must be a string: one SELECT statement"
		case strings.ContainsRune(sql, 0):
			return "contains a NUL character (U+0000)"
		}
		return ""
	})
	return sql, issues
}

// runSQL answers the sql_query tool: rows as structured content with the
// columns, the guards that engaged and the values cut; or a refusal naming
// its rule or limit, as text (the output schema is the rows'). A statement
// Postgres refuses reports its SQLSTATE only; the text goes to the host
// log.
func (s *Server) runSQL(ctx context.Context, session *sdk.ServerSession, t *tool, caller *engine.Caller, args json.RawMessage) *sdk.CallToolResult {
	outcome, code, correlation := engine.StatusOK, errcode.Code(""), ""
	defer func() {
		s.called(ctx, session, engine.ToolCalled{Tool: t.def.Name, Outcome: outcome, Actor: caller.Subject, Tenant: caller.Tenant,
			Code: code, CorrelationID: correlation})
	}()
	sql, issues := sqlInput(args)
	if len(issues) > 0 {
		outcome, code = engine.StatusInvalidInput, errcode.InputInvalid // reported as every tool reports a refused input
		return render(t, &engine.Outcome{Status: engine.StatusInvalidInput, Code: code, Issues: issues})
	}
	res, err := s.querier.Query(ctx, caller.Tenant, sql)
	var refusal *sqlguard.Refusal
	var tooLarge *sqlquery.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		refused := errcode.New(errcode.MCPQueryTooLarge, "", tooLarge)
		outcome, code = engine.StatusRejected, refused.Code
		return sqlRefusal(map[string]any{"status": "rejected", "code": string(code),
			"message": fmt.Sprintf("sql_query ended the statement (%s): one message of its answer exceeded %d bytes. %s", code, sqlquery.MaxMessageBytes, refused.Fix())})
	case errors.As(err, &refusal):
		rejected := errcode.New(errcode.MCPQueryRejected, "", refusal)
		outcome, code = engine.StatusRejected, rejected.Code
		return sqlRefusal(map[string]any{"status": "rejected", "code": string(code), "rule": string(refusal.Rule),
			"message": fmt.Sprintf("sql_query refused the statement (%s): rule %s. %s", code, refusal.Rule, rejected.Fix())})
	case err != nil:
		outcome = engine.StatusFailed
		correlation = uuid.NewString()
		body := map[string]any{"status": "failed", "correlationId": correlation}
		message := fmt.Sprintf("sql_query failed. The database error is withheld; an operator can read it in the host log under correlationId %q.", correlation)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			body["sqlstate"] = pgErr.Code
			message = fmt.Sprintf("sql_query failed: Postgres refused the statement (error code %s). The database error is withheld; an operator can read it in the host log under correlationId %q.", pgErr.Code, correlation)
			if pgErr.Code == pgerrcode.InsufficientPrivilege {
				// Mostly a column it may not read, reached through * or a
				// whole row: this tool's description lists what it may.
				message += " It may not read a relation or column the statement reads (a * or a whole row reads every column): name only the columns this tool's description lists."
			}
		}
		s.log.ErrorContext(ctx, "sql_query failed", "correlation_id", correlation, "tenant", caller.Tenant, "error", err)
		body["message"] = message
		return sqlRefusal(body)
	}
	body := map[string]any{"columns": res.Columns, "rows": res.Rows, "rowCount": len(res.Rows), "guards": res.Guards, "bytes": res.Bytes}
	summary := fmt.Sprintf("%d row(s).", len(res.Rows))
	if res.TruncatedBy != "" {
		body["truncatedBy"] = res.TruncatedBy
		summary = fmt.Sprintf("%d row(s), truncated by the %s limit.", len(res.Rows), res.TruncatedBy)
	}
	if len(res.CutValues) > 0 {
		body["cutValues"], body["cutChars"] = res.CutValues, res.CutChars
		summary += fmt.Sprintf(" %d value(s) cut to their first %d characters, as strings (cutValues lists them by row and column).", len(res.CutValues), res.CutChars)
	}
	// The rows were encoded as they were read; the body is encoded once,
	// here, and sent as those bytes. The rows are valid JSON by
	// construction (sqlquery's FuzzEncode holds it) and every other value
	// is a string, a number or a plain struct, so encoding cannot fail.
	text, _ := json.Marshal(body)
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(text), Content: []sdk.Content{&sdk.TextContent{Text: summary + "\n" + string(text)}}}
}

// sqlRefusal is an answer of a query that did not run or failed: its
// message, then its body as JSON, both as text, as a read's refusal is
// (render): structured content would have to match the rows' schema.
func sqlRefusal(body map[string]any) *sdk.CallToolResult {
	text, _ := json.Marshal(body) // strings only
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: body["message"].(string)}, &sdk.TextContent{Text: string(text)}}}
}
