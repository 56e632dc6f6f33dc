package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/sqlquery"
)

// runSQL answers the sql_query tool: rows as structured content with the
// guards that engaged and the values cut, or a refusal naming its rule or
// limit. A statement Postgres
// refuses reports its SQLSTATE only; the text goes to the host log.
func (s *Server) runSQL(ctx context.Context, t *tool, caller *engine.Caller, args json.RawMessage) *sdk.CallToolResult {
	outcome, code, correlation := engine.StatusOK, errcode.Code(""), ""
	defer func() {
		s.hooks.Emit(engine.ToolCalled{Tool: t.def.Name, Outcome: outcome, Actor: caller.Subject, Tenant: caller.Tenant,
			Code: code, CorrelationID: correlation})
	}()
	var in struct {
		SQL *string `json:"sql"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.SQL == nil {
		outcome = engine.StatusInvalidInput // reported as every tool reports a refused input
		out := &engine.Outcome{Status: engine.StatusInvalidInput, Issues: []engine.Issue{{Path: "/sql", Message: "required: one SELECT statement"}}}
		return render(t, out)
	}
	res, err := s.querier.Query(ctx, caller.Tenant, *in.SQL)
	var refusal *sqlguard.Refusal
	var tooLarge *sqlquery.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		refused := errcode.New(errcode.MCPQueryTooLarge, "", tooLarge)
		outcome, code = engine.StatusRejected, refused.Code
		body := map[string]any{"status": "rejected", "code": string(code),
			"message": fmt.Sprintf("sql_query ended the statement (%s): one message of its answer exceeded %d bytes. %s", code, sqlquery.MaxMessageBytes, refused.Fix())}
		return &sdk.CallToolResult{IsError: true, StructuredContent: body, Content: []sdk.Content{&sdk.TextContent{Text: body["message"].(string)}}}
	case errors.As(err, &refusal):
		rejected := errcode.New(errcode.MCPQueryRejected, "", refusal)
		outcome, code = engine.StatusRejected, rejected.Code
		body := map[string]any{"status": "rejected", "code": string(code), "rule": string(refusal.Rule),
			"message": fmt.Sprintf("sql_query refused the statement (%s): rule %s. %s", code, refusal.Rule, rejected.Fix())}
		return &sdk.CallToolResult{IsError: true, StructuredContent: body, Content: []sdk.Content{&sdk.TextContent{Text: body["message"].(string)}}}
	case err != nil:
		outcome = engine.StatusFailed
		correlation = uuid.NewString()
		body := map[string]any{"status": "failed", "correlationId": correlation}
		message := fmt.Sprintf("sql_query failed. The database error is withheld; an operator can read it in the host log under correlationId %q.", correlation)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			body["sqlstate"] = pgErr.Code
			message = fmt.Sprintf("sql_query failed: Postgres refused the statement (error code %s). The database error is withheld; an operator can read it in the host log under correlationId %q.", pgErr.Code, correlation)
		}
		s.log.ErrorContext(ctx, "sql_query failed", "correlation_id", correlation, "tenant", caller.Tenant, "error", err)
		body["message"] = message
		return &sdk.CallToolResult{IsError: true, StructuredContent: body, Content: []sdk.Content{&sdk.TextContent{Text: message}}}
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
