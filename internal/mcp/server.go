// Package mcp serves the ontology as governed MCP tools. It is the only
// package that imports the MCP go-sdk. Tool handlers are raw: arguments
// reach the engine unvalidated, because the engine is the one validator.
package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/rpcerror"
	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/tracing"
)

// Options configures a Server.
type Options struct {
	// Engine answers every call. Required.
	Engine *engine.Engine
	// Ontology is the declaration the engine serves. Required.
	Ontology *ontology.Config
	// Version is reported to clients. Defaults to "dev".
	Version string
	// Querier answers the sql_query tool when the config enables it.
	Querier *sqlquery.Querier
	// Hooks receives a ToolCalled event per tool call (the host log's
	// "tool call" lines are one subscriber of them). Nil: none.
	Hooks *engine.Hooks
	// Logger receives what an operator needs to read a failure: the
	// database's words of a failed query, a panic's stack. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// ApprovalPoll is how often a session's subscribed approvals are
	// re-read, to see changes other processes made (a decision at the
	// desk of another replica). Defaults to ApprovalPollDefault; negative:
	// never, only this process's changes (through Hooks) are seen.
	ApprovalPoll time.Duration
	// Tracer makes a span per tool call ("tools/call NAME"), the parent
	// of the engine's. Nil: none.
	Tracer trace.Tracer
}

// Server builds MCP servers whose tool catalog is the one a caller may see.
// It is safe for concurrent use.
type Server struct {
	engine  *engine.Engine
	querier *sqlquery.Querier
	cfg     *ontology.Config
	version string
	hooks   *engine.Hooks
	tracer  trace.Tracer
	log     *slog.Logger
	schemas *sdk.SchemaCache
	tools   map[string]*tool
	// toolNames and promptNames are the names of tools and of the
	// config's prompts, sorted once: forCaller lists a caller's on every
	// HTTP request, in this order.
	toolNames, promptNames []string

	mu       sync.Mutex
	profiles map[string]*sdk.Server // by the names of the tools and prompts a caller sees
	// byCaller is forCaller's answer by the caller's AudienceKey, for at
	// most maxRememberedCallers callers: the gates need not be asked again
	// at each request of a caller seen lately.
	byCaller map[string]*sdk.Server

	// watch tells sessions subscribed to an approval's resource when its
	// status changes (resources.go).
	watch *watcher

	// beforeTool, set only by tests (export_test.go), runs as a tool
	// handler starts.
	beforeTool func(tool string)
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil || opts.Ontology == nil {
		return nil, errors.New("mcp: Options.Engine and Options.Ontology are required")
	}
	s := &Server{
		engine:   opts.Engine,
		querier:  opts.Querier,
		cfg:      opts.Ontology,
		version:  cmp.Or(opts.Version, "dev"),
		hooks:    opts.Hooks,
		tracer:   opts.Tracer,
		log:      cmp.Or(opts.Logger, slog.Default()),
		schemas:  sdk.NewSchemaCache(),
		profiles: map[string]*sdk.Server{},
		byCaller: map[string]*sdk.Server{},
	}
	if s.tracer == nil {
		s.tracer = noop.NewTracerProvider().Tracer("")
	}
	s.tools = s.declare()
	s.toolNames = slices.Sorted(maps.Keys(s.tools))
	s.promptNames = slices.Sorted(maps.Keys(s.cfg.Prompts))
	s.watch = newWatcher(s.engine, s.log, opts.ApprovalPoll)
	if opts.Hooks != nil {
		opts.Hooks.Subscribe(0, s.watch.observe)
	}
	return s, nil
}

// callerKey carries the caller of an HTTP request to its tool handlers, in
// its TokenInfo's Extra.
const callerKey = "orangerail.caller"

// visible lists the tools caller may see, by name, sorted. A tool the
// caller may not see is absent; calling it answers as calling a tool that
// does not exist, and each handler checks the caller again.
func (s *Server) visible(caller *engine.Caller) []string { return s.offer(s.usable(caller)) }

// usable lists, sorted, every tool caller may use: those it is offered,
// and, on the meta surface, the grouped tools behind manage_resource. The
// instructions and resources speak of these.
func (s *Server) usable(caller *engine.Caller) []string {
	var names []string
	for _, name := range s.toolNames {
		if s.engine.Sees(caller, name) {
			names = append(names, name)
		}
	}
	return names
}

// offer lists the tools offered by name of a caller's usable tools: on
// the meta surface (the meta tools are usable only there), every grouped
// tool is left to manage_resource.
func (s *Server) offer(usable []string) []string {
	if !slices.Contains(usable, ontology.ManageResourceTool) {
		return usable
	}
	return slices.DeleteFunc(slices.Clone(usable), func(name string) bool { return s.cfg.GroupOf(name) != "" })
}

// visibleAs lists, sorted, the tools caller would see if it were served
// surface, whatever it is served: the meta tools under meta, and each
// tool of the caller's audience that surface does not put behind them.
// It is visible's rule with the surface given (Server.Measure).
func (s *Server) visibleAs(caller *engine.Caller, surface ontology.Surface) []string {
	var names []string
	for name, t := range s.tools {
		meta := t.kind == ontology.ToolListResources || t.kind == ontology.ToolDescribeResource || t.kind == ontology.ToolManageResource
		grouped := s.cfg.GroupOf(name) != ""
		switch {
		case meta && surface == ontology.SurfaceMeta,
			!meta && s.engine.Sees(caller, name) && (surface != ontology.SurfaceMeta || !grouped):
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// maxRememberedCallers bounds Server.byCaller; past it, the callers are
// forgotten at once and remembered anew as they call.
const maxRememberedCallers = 4096

// forCaller returns the MCP server for a caller's catalog. Servers are
// shared by every caller who sees the same tools; the handlers read the
// caller from each request. The catalog depends on nothing of the caller
// but its AudienceKey, and a Server's config never changes, so the answer
// is remembered by that key: an HTTP request of a caller seen lately asks
// no gate (nor an audience predicate) before its handler, which asks its
// own.
func (s *Server) forCaller(caller *engine.Caller) *sdk.Server {
	audience := caller.AudienceKey()
	s.mu.Lock()
	srv, ok := s.byCaller[audience]
	s.mu.Unlock()
	if ok {
		return srv
	}
	// The usable tools decide the offered ones (offer), so they key the
	// server. They are asked outside the lock: a predicate may be slow.
	usable, prompts := s.usable(caller), s.visiblePrompts(caller)
	key := strings.Join(usable, ",") + "|" + strings.Join(prompts, ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok = s.profiles[key]
	if !ok {
		srv = s.build(usable, prompts, nil)
		s.profiles[key] = srv
	}
	if len(s.byCaller) >= maxRememberedCallers {
		clear(s.byCaller)
	}
	s.byCaller[audience] = srv
	return srv
}

// session builds the MCP server of one session of caller (stdio,
// in-memory): the caller of every request is fixed.
func (s *Server) session(caller *engine.Caller) *sdk.Server {
	return s.build(s.usable(caller), s.visiblePrompts(caller), caller)
}

// build makes an MCP server offering the usable tools (offer) and the
// named prompts, the resources of the usable catalog and instructions
// for it. fixed, when set, is
// the caller of every request of the server's one session (stdio,
// in-memory), where resources/subscribe works; otherwise each request
// carries its own, and nothing is subscribed.
func (s *Server) build(usable, prompts []string, fixed *engine.Caller) *sdk.Server {
	names := s.offer(usable)
	opts := &sdk.ServerOptions{SchemaCache: s.schemas, SetCacheable: private,
		Instructions: s.instructions(usable, fixed != nil), Capabilities: s.capabilities(fixed != nil)}
	var srv *sdk.Server // the subscribe handler's, set before any request
	if fixed != nil {
		opts.SubscribeHandler = func(ctx context.Context, req *sdk.SubscribeRequest) error { return s.subscribe(ctx, srv, fixed, req) }
		opts.UnsubscribeHandler = s.unsubscribe
	}
	srv = sdk.NewServer(&sdk.Implementation{Name: "orangerail", Title: s.cfg.Service, Version: s.version}, opts)
	for _, name := range names {
		t := s.tools[name]
		_, served := s.seenBy(t, usable)
		srv.AddTool(served, s.handler(t, fixed))
	}
	s.addResources(srv, usable, fixed)
	s.addPrompts(srv, prompts, fixed)
	srv.AddReceivingMiddleware(coded, s.offered(names, fixed), s.undeclared(opts.Capabilities), promptsHeld(prompts), levelKnown)
	return srv
}

// codeOfRPC is the stable code of a JSON-RPC error the SDK, or a
// middleware, answers without data of its own. The codes after the first
// two the SDK answers itself, before any handler or middleware, mostly to
// a request of protocol 2026-07-28 (withCode gives them theirs, over HTTP
// and stdio): a header unlike the body (HTTP only), a protocol version the
// server does not serve (the same refusal as an unsupported
// MCP-Protocol-Version of an earlier one) and a method it does not serve.
// A handler's -32601 is no use here: the SDK's connection rewrites every
// error of that code to its own words, data dropped, so the transports
// refuse a method the server does not serve before the SDK reads it
// (unservedMethod).
var codeOfRPC = map[int64]errcode.Code{
	jsonrpc.CodeInvalidParams:          errcode.MCPInvalidParams,
	jsonrpc.CodeInvalidRequest:         errcode.MCPInvalidRequest,
	sdk.CodeHeaderMismatch:             errcode.MCPHeaderMismatch,
	sdk.CodeUnsupportedProtocolVersion: errcode.MCPInvalidRequest,
	jsonrpc.CodeMethodNotFound:         errcode.MCPMethodUnknown,
}

// coded gives a JSON-RPC error that carries no data the stable code and
// data every other refusal carries (rpcerror.Data), and a message that
// begins with the code: a list cursor the server never issued, say. It is
// the outermost middleware, so it sees the others' errors too; an error
// with data of its own (an unknown tool's) is passed as it is.
func coded(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		var wire *jsonrpc.Error
		if err == nil || !errors.As(err, &wire) {
			return res, err
		}
		if uri, ok := resourceURI(req); ok && wire.Code == jsonrpc.CodeInvalidParams && wire.Message == resourceNotFoundMessage {
			// The SDK's own not-found (a URI no resource matches) writes
			// the URI into its data with Go's quoting, which is no JSON
			// for a control character: the session's writer then failed,
			// and a stdio server exited. Answered as every other refusal.
			return nil, resourceNotFound(uri)
		}
		if len(wire.Data) > 0 {
			return res, err
		}
		code, ok := codeOfRPC[wire.Code]
		if !ok {
			return res, err
		}
		msg := err.Error()
		if strings.HasSuffix(method, "/list") && msg == "invalid params" {
			// The SDK's bare sentinel, which its lists return for a cursor
			// they cannot decode and for nothing else.
			msg = method + ": params.cursor is not a cursor this server gave; list from the start, without one, and follow nextCursor"
		}
		return nil, &jsonrpc.Error{Code: wire.Code, Message: rpcerror.Message(code, msg), Data: mustJSON(rpcerror.DataOf(code, 0))}
	}
}

// resourceNotFoundMessage is the message of sdk.ResourceNotFoundError,
// by which coded knows the SDK's not-found.
const resourceNotFoundMessage = "Resource not found"

// resourceNotFound is the answer to a resource the caller is not offered
// — none of the URI exists, or the caller may not read it — the same for
// both: the SDK's code and message, with the stable code and the URI in
// the data.
func resourceNotFound(uri string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: rpcerror.Message(errcode.MCPResourceUnknown, resourceNotFoundMessage),
		Data: mustJSON(struct {
			rpcerror.Data
			URI string `json:"uri"`
		}{rpcerror.DataOf(errcode.MCPResourceUnknown, 0), uri})}
}

// resourceURI is the URI a resources request names, when it is one.
func resourceURI(req sdk.Request) (string, bool) {
	switch p := req.GetParams().(type) {
	case *sdk.ReadResourceParams:
		return p.URI, true
	case *sdk.SubscribeParams:
		return p.URI, true
	case *sdk.UnsubscribeParams:
		return p.URI, true
	}
	return "", false
}

// loggingLevels are the levels logging/setLevel may set (MCP's, RFC 5424's
// severities).
var loggingLevels = []sdk.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"} //nolint:staticcheck // SA1019: as capabilities

// levelKnown refuses a logging/setLevel of a level MCP does not name: the
// SDK would keep it, and then send the session every message or none, as
// its unknown level compares.
func levelKnown(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if set, ok := req.GetParams().(*sdk.SetLoggingLevelParams); ok && method == "logging/setLevel" && !slices.Contains(loggingLevels, set.Level) { //nolint:staticcheck // SA1019: as capabilities
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("logging/setLevel: params.level must be one of %q", loggingLevels)}
		}
		return next(ctx, method, req)
	}
}

// capabilities are exactly what a server serves: tools, without
// listChanged (a catalog never changes while a session lasts, so none is
// ever sent); resources, subscribable only where a session lasts
// (session); prompts only when the config declares any, for anyone; and
// logging: each tool call's outcome is sent to a session whose client set
// a level (Server.called).
func (s *Server) capabilities(session bool) *sdk.ServerCapabilities {
	caps := &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Resources: &sdk.ResourceCapabilities{Subscribe: session},
		Logging: &sdk.LoggingCapabilities{}} //nolint:staticcheck // SA1019: deprecated in protocol 2026-07-28 (SEP-2577), and still what clients of earlier versions ask for; kept through the deprecation window

	if len(s.cfg.Prompts) > 0 {
		caps.Prompts = &sdk.PromptCapabilities{}
	}
	return caps
}

// undeclared answers a request of a capability the server does not
// declare as a method it does not have (-32601), for any transport: the
// SDK would answer prompts/list without the capability. The transports
// refuse such a request first, with the stable code (unservedMethod).
func (s *Server) undeclared(caps *sdk.ServerCapabilities) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if why := unservedMethod(method, caps); why != "" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why}
			}
			return next(ctx, method, req)
		}
	}
}

// offered answers a tools/call of a tool this server does not hold —
// one that does not exist, or one the caller does not see — as the
// handlers answer a hidden tool, byte for byte, and emits its ToolCalled,
// so that the host log has a line for every tools/call.
func (s *Server) offered(names []string, fixed *engine.Caller) sdk.Middleware {
	held := make(map[string]bool, len(names))
	for _, name := range names {
		held[name] = true
	}
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			call, ok := req.(*sdk.CallToolRequest)
			if method != "tools/call" || !ok || call.Params == nil || held[call.Params.Name] {
				return next(ctx, method, req)
			}
			caller := fixed
			if caller == nil {
				caller = callerOf(call)
			}
			refusal := engine.RefusalUnknown
			if _, exists := s.tools[call.Params.Name]; exists {
				refusal = engine.RefusalHidden
			}
			// The name as the host log and the session's log message hold
			// it: shortened, since any name may be sent (one of 500 KB made
			// a line of 500 KB).
			s.emit(ctx, call.Session, display.Echo(call.Params.Name), caller, &engine.Outcome{Status: engine.StatusNotFound, Code: errcode.MCPToolUnknown}, refusal)
			return nil, unknownTool(call.Params.Name)
		}
	}
}

// emit hands the hooks a tool call's ToolCalled, and tells the session:
// refusal names the gate that refused it, or is "" to classify the outcome
// (engine.RefusalOf).
func (s *Server) emit(ctx context.Context, session *sdk.ServerSession, name string, caller *engine.Caller, out *engine.Outcome, refusal engine.Refusal) {
	ev := engine.ToolCalled{Tool: name, Outcome: out.Status, Code: outcomeCode(out), Scope: out.Scope,
		CorrelationID: out.CorrelationID, Refusal: cmp.Or(refusal, engine.RefusalOf(out)), TraceID: tracing.TraceID(ctx)}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("orangerail.outcome", string(ev.Outcome)), attribute.String("orangerail.refusal", string(ev.Refusal)),
			attribute.String("orangerail.correlation_id", ev.CorrelationID), attribute.String("orangerail.code", string(ev.Code)))
	}
	if caller != nil {
		ev.Actor, ev.Tenant = caller.Subject, caller.Tenant
	}
	s.called(ctx, session, ev)
}

// called hands the hooks ev, and sends the session ev as a log message
// (notifications/message), as the host log's line says it — at warning
// for a refusal, info otherwise, never the arguments — once its client has
// set a level (logging/setLevel): a client's developer sees why a call was
// refused where the call was made. A session that ended, or a stateless
// HTTP request's, is told nothing.
func (s *Server) called(ctx context.Context, session *sdk.ServerSession, ev engine.ToolCalled) {
	ev.TraceID = cmp.Or(ev.TraceID, tracing.TraceID(ctx))
	s.hooks.Emit(ev)
	if session == nil {
		return
	}
	level := sdk.LoggingLevel("info") //nolint:staticcheck // SA1019: the deprecated logging feature, served through its window (see capabilities)
	if ev.Level() >= slog.LevelWarn {
		level = "warning"
	}
	data := map[string]string{"tool": ev.Tool, "outcome": string(ev.Outcome)}
	refusal := ev.Refusal
	if refusal == engine.RefusalHidden {
		// Hidden ≠ forbidden: the session is told what a call of a tool
		// that does not exist tells it; the host log alone says hidden.
		refusal = engine.RefusalUnknown
	}
	for _, kv := range [...][2]string{{"refusal", string(refusal)}, {"code", string(ev.Code)}, {"scope", ev.Scope}, {"correlationId", ev.CorrelationID}} {
		if kv[1] != "" {
			data[kv[0]] = kv[1]
		}
	}
	_ = session.Log(ctx, &sdk.LoggingMessageParams{Level: level, Logger: "orangerail", Data: data}) //nolint:staticcheck // SA1019: see capabilities
}

// Connect serves one caller over a transport (stdio, in-memory) until the
// client disconnects or ctx ends.
func (s *Server) Connect(ctx context.Context, caller *engine.Caller, t sdk.Transport) (*sdk.ServerSession, error) {
	ss, err := s.session(caller).Connect(ctx, t, nil)
	if err == nil {
		go func() { _ = ss.Wait(); s.watch.drop(ss) }()
	}
	return ss, err
}

// Run serves one caller over a transport until the client disconnects or
// ctx ends.
func (s *Server) Run(ctx context.Context, caller *engine.Caller, t sdk.Transport) error {
	return s.RunChecked(ctx, caller, nil, t)
}

// handler runs one tool call for the request's caller. A panic in it is
// contained: the call answers internal_error and the session or
// connection serves on.
func (s *Server) handler(t *tool, fixed *engine.Caller) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		ctx, span := s.tracer.Start(ctx, t.span, t.spanStart...)
		defer span.End()
		caller := fixed
		defer func() {
			if v := recover(); v != nil {
				res, err = s.contained(ctx, t, caller, v), nil
			}
		}()
		if caller == nil {
			caller = callerOf(req)
		}
		if caller == nil {
			s.emit(ctx, req.Session, t.def.Name, nil, &engine.Outcome{Status: engine.StatusNotFound, Code: errcode.MCPToolUnknown}, engine.RefusalHidden)
			return nil, unknownTool(req.Params.Name)
		}
		if s.behindMeta(caller, t.def.Name) {
			// A meta caller reaches a grouped tool through manage_resource
			// only; by name, it answers as a tool that does not exist.
			s.emit(ctx, req.Session, t.def.Name, caller, &engine.Outcome{Status: engine.StatusNotFound, Code: errcode.MCPToolUnknown}, engine.RefusalHidden)
			return nil, unknownTool(req.Params.Name)
		}
		return s.call(ctx, req.Session, t, caller, req.Params.Arguments)
	}
}

// call runs a call of t by caller through its gates, and emits its
// ToolCalled under t's name: the one path a tools/call and a
// manage_resource call share. The gates before the input: a hidden tool
// answers as an unknown one; a scope the token lacks is a protocol error
// naming it.
func (s *Server) call(ctx context.Context, session *sdk.ServerSession, t *tool, caller *engine.Caller, args json.RawMessage) (*sdk.CallToolResult, error) {
	if out := s.engine.Admit(ctx, caller, t.def.Name); out != nil {
		s.emit(ctx, session, t.def.Name, caller, out, "")
		if out.Code == errcode.MCPScopeDenied {
			return nil, scopeDenied(t.def.Name, out)
		}
		return nil, unknownTool(t.def.Name)
	}
	if s.beforeTool != nil {
		s.beforeTool(t.def.Name)
	}
	switch t.kind {
	case ontology.ToolSQLQuery:
		return s.runSQL(ctx, session, t, caller, args), nil
	case ontology.ToolManageResource:
		return s.manage(ctx, session, caller, args)
	case ontology.ToolListResources:
		return s.listResources(ctx, session, t, caller, args), nil
	}
	out := s.run(ctx, t, caller, args)
	res := render(t, out)
	s.emit(ctx, session, t.def.Name, caller, out, "")
	return res, nil
}

// contained answers a tool call that panicked: internal_error under a
// correlation id of its own, the panic and its stack in the host log under
// that id, never in the answer.
func (s *Server) contained(ctx context.Context, t *tool, caller *engine.Caller, v any) *sdk.CallToolResult {
	correlation := uuid.NewString()
	s.log.ErrorContext(ctx, "tool handler panic", "tool", t.def.Name, "correlation_id", correlation,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	out := &engine.Outcome{Status: engine.StatusInternalError, CorrelationID: correlation}
	s.emit(ctx, nil, t.def.Name, caller, out, "")
	return render(t, out)
}

// private marks every cacheable result as the caller's own and stale at
// once: a catalog is answered for one caller, and may change with a role.
func private(_ context.Context, _ sdk.Request, c *sdk.Cacheable) {
	c.TTLMs, c.CacheScope = 0, "private"
}

// callerOf is the caller of an HTTP request's tool call: the one its
// Authenticator verified, from req.Extra.TokenInfo.
func callerOf(req *sdk.CallToolRequest) *engine.Caller {
	if req.Extra == nil {
		return nil
	}
	return callerOfInfo(req.Extra.TokenInfo)
}

// ToolNames lists, for tests and diagnostics, the tools caller may see.
func (s *Server) ToolNames(caller *engine.Caller) []string { return s.visible(caller) }

// schemaOf decodes a JSON Schema written as YAML into what the SDK sends.
func schemaOf(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// ServeStdio serves one caller over this process's stdin and stdout until
// the client disconnects or ctx ends. stdout carries only JSON-RPC. check,
// when set, is asked before every request, as RunChecked asks it. Each
// line is read within a bound, and one that is no message is answered,
// not fatal (ServeLines).
func (s *Server) ServeStdio(ctx context.Context, caller *engine.Caller, check func(context.Context) error) error {
	return s.ServeLines(ctx, caller, check, os.Stdin, os.Stdout)
}

// RunChecked serves one caller over a transport as Run does, asking check
// before answering each request (a notification or ping excepted): a
// session's token is honoured only while it verifies, as HTTP verifies
// each request's, so once it expires tools/list, tools/call and every
// other request are refused as unauthenticated. The session stays open so
// the client reads why rather than a closed pipe. A nil check allows all.
func (s *Server) RunChecked(ctx context.Context, caller *engine.Caller, check func(context.Context) error, t sdk.Transport) error {
	srv := s.session(caller)
	if check != nil {
		srv.AddReceivingMiddleware(s.checked(check))
	}
	ss, err := srv.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	defer s.watch.drop(ss)
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		if err := <-ended; err != nil {
			s.log.DebugContext(ctx, "a session closed as its context ended", "error", err)
		}
		return ctx.Err()
	case err := <-ended:
		return err
	}
}

// codeUnauthenticated is the JSON-RPC error of a request whose session's
// token no longer verifies: a server-defined code (-32000 to -32099).
const codeUnauthenticated = -32001

// checked refuses each request check refuses, under check's code
// (X_MCP_UNAUTHORIZED when it has none).
func (s *Server) checked(check func(context.Context) error) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "ping" || strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			if err := check(ctx); err != nil {
				// The client is told the code's cause and fix, never the
				// refusal's reason: that is the host log's, as over HTTP.
				s.log.WarnContext(ctx, "request refused: the session's token no longer verifies", "method", method, "error", err.Error())
				code := errcode.MCPUnauthorized
				var coded *errcode.Error
				if errors.As(err, &coded) {
					code = coded.Code
				}
				entry, _ := errcode.Explain(string(code))
				return nil, &jsonrpc.Error{Code: codeUnauthenticated, Message: string(code) + ": " + entry.Cause + " Fix: " + entry.Fix}
			}
			return next(ctx, method, req)
		}
	}
}

// ReadOnly reports whether the named tool only reads (a get, a list, a
// describe tool, a meta tool but manage_resource, or sql_query). An
// unknown tool does not.
func (s *Server) ReadOnly(name string) bool {
	t, ok := s.tools[name]
	return ok && (t.read() || t.kind == ontology.ToolSQLQuery)
}

// ReadOnlyCall reports whether caller's tools/call of the named tool with
// arguments only reads: a manage_resource call reads when the tool it
// calls does, so that it is billed in that tool's bucket. A tool caller
// does not see is billed as one that does not exist (not read-only):
// hidden ≠ forbidden, in the allowance it spends too.
func (s *Server) ReadOnlyCall(caller *engine.Caller, name string, arguments map[string]any) bool {
	if caller == nil || !s.engine.Sees(caller, name) {
		return false
	}
	if t, ok := s.tools[name]; ok && t.kind == ontology.ToolManageResource {
		inner, _ := arguments["tool"].(string)
		return s.engine.Sees(caller, inner) && s.ReadOnly(inner)
	}
	return s.ReadOnly(name)
}
