package httpeffect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TargetReader reads the target of an action declared target: {upstream:
// …, get: …}: a GET bound from the input as an http execute's request is
// (build), sent through a Caller under the same credentials, caps,
// timeouts and attempt rules, retried as safe. It is safe for concurrent
// use.
type TargetReader struct {
	get *Effect
}

// NewTargetReader makes the target reader of an action whose target an
// upstream answers; it is an engine.TargetReaderFactory.
func NewTargetReader(name string, a *ontology.Action) (engine.TargetReader, error) {
	if !a.Target.Read() || a.Target.Get == nil {
		return nil, errors.New("httpeffect: the action's target is not read from an upstream")
	}
	g := a.Target.Get
	base := g.BaseURL()
	if base == nil {
		return nil, errors.New("httpeffect: the target's upstream has no base URL (load the config with ontology.Parse)")
	}
	path, err := ontology.ParsePath(g.Path)
	if err != nil {
		return nil, err
	}
	caller, err := NewCaller(g.Upstream, g.UpstreamDecl(), g.Presented(), g.TokenScopes())
	if err != nil {
		return nil, err
	}
	plan := &Plan{
		Describe: fmt.Sprintf("target: GET %s %s", g.Upstream, g.Path),
		Method:   http.MethodGet,
		Limits:   g.Limits(),
		// A GET cannot act: every failure may be attempted again, and none
		// leaves an outcome in doubt.
		ReadOnly: true, Retry: true, RetrySent: true,
		// 404 is an answer, not a failure: there is no target, which the
		// engine reports as for a missing row.
		Succeeded: func(status int) bool { return status == http.StatusNotFound || g.Succeeded(status) },
		Read:      readTarget,
	}
	return &TargetReader{get: &Effect{action: name, spec: g, base: base, path: path, caller: caller, plan: plan}}, nil
}

// readTarget reads a target's answer: none for 404, else the body, which
// must be a JSON object, since where sees it as target, and one the
// records that show it (the approval's, the execution's) can hold: a
// member named twice, say, would have them refused.
func readTarget(status int, _ http.Header, body []byte) Answer {
	if status == http.StatusNotFound {
		return Answer{Result: json.RawMessage("null")}
	}
	var object map[string]json.RawMessage
	if err := json.Unmarshal(body, &object); err != nil || object == nil {
		return Answer{Unreadable: errors.New("the target's answer is not a JSON object")}
	}
	if !engine.StorableJSON(body) {
		return Answer{Unreadable: errors.New("the target's answer is a JSON object the audit record cannot hold (a member named twice, nesting too deep, a number too long, a NUL)")}
	}
	return Answer{Result: body}
}

// ReadTarget sends the GET and returns the target, or nil when the
// upstream answered 404.
func (r *TargetReader) ReadTarget(ctx context.Context, call *engine.EffectCall) (json.RawMessage, error) {
	req, err := Place(call, r.get.plan, r.get.build)
	if err != nil {
		return nil, err
	}
	// The read's attempts are not the effect's: none is recorded as an
	// effect_attempt, and none spends the budget.
	res, err := r.get.caller.Do(ctx, &engine.EffectCall{Tenant: call.Tenant, Action: call.Action, Input: call.Input}, r.get.plan, req)
	if err != nil {
		return nil, err
	}
	if string(res.Data) == "null" {
		return nil, nil
	}
	return res.Data, nil
}
