package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/rpcerror"
)

// maxBodyBytes is the bound on one message, over HTTP (its body) and
// stdio (its line): http.max_body_bytes, which the front caps a body at
// too.
func (s *Server) maxBodyBytes() int64 {
	if n := s.cfg.HTTP.MaxBodyBytes; n > 0 {
		return n
	}
	return sdk.DefaultMaxRequestBodyBytes
}

// answerJSONRPC serves next, go-sdk's Streamable HTTP handler, so that a
// client receives every refusal as a JSON-RPC error carrying its request's
// id when the body held one, and a stable code in its data. The SDK
// answers what it cannot take in plain text with 400 (a body that is not
// JSON or not JSON-RPC, an unknown method, a missing id, a missing Accept)
// or 403, 405, 413, 415, and some requests of protocol 2026-07-28 with a
// JSON-RPC error of its own, without a stable code; here:
//
//   - a POSTed JSON body is read first: one too large is 413
//     X_MCP_BODY_TOO_LARGE; one that is not JSON is -32700
//     X_MCP_PARSE_ERROR, a batch or JSON that is no JSON-RPC message -32600
//     (rpcerror.Inspect) — each 400, as the SDK answered;
//   - a request whose params the SDK would not read is refused by the
//     check stdio makes too (paramsProblem): -32602 X_MCP_INVALID_PARAMS,
//     200 as the SDK answered, or, params missing or null where required,
//     -32600 X_MCP_INVALID_REQUEST, 400;
//   - what the SDK then refuses in plain text is answered in JSON-RPC
//     instead, with the SDK's status, except that a request of a method the
//     SDK does not know is -32601 X_MCP_METHOD_UNKNOWN answered 200, as any
//     other JSON-RPC error to a request (a strict client reads the code
//     only from a 2xx); the SDK's words are the message;
//   - what the SDK refuses in JSON-RPC, to a request of protocol
//     2026-07-28 — a header unlike the body (-32020
//     X_MCP_HEADER_MISMATCH), a params._meta without the protocol version
//     or client capabilities (-32602 X_MCP_INVALID_PARAMS), a protocol
//     version it does not serve (-32022 X_MCP_INVALID_REQUEST, the
//     versions supported and requested kept in the data), a method it
//     does not serve (-32601 X_MCP_METHOD_UNKNOWN, 404 as that version
//     asks) — is given the stable code of its JSON-RPC code, its code,
//     words, id and status kept (answerJSONRefusal); one whose data names
//     a stable code already, a tool's refusal, passes as written. A
//     success or a stream passes unheld.
//
// Nothing the SDK refuses is let through, and nothing it takes is refused
// but what rpcerror.Inspect refuses (what the SDK refuses too, and a number
// id the SDK would answer under another id: 1.5 as 1, 2^63 overflowed) and
// what paramsProblem refuses, which the SDK refuses too.
func (s *Server) answerJSONRPC(next http.Handler) http.Handler {
	limit := s.maxBodyBytes()
	caps := s.capabilities(false) // each request its own session
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				rpcerror.New(rpcerror.ID(body), rpcerror.CodeServerError, errcode.MCPBodyTooLarge,
					fmt.Sprintf("the body is larger than %d bytes", limit), limit).Write(w, http.StatusRequestEntityTooLarge)
				return
			case err != nil:
				rpcerror.New(nil, rpcerror.CodeInvalidRequest, errcode.MCPInvalidRequest, "the body could not be read", 0).
					Write(w, http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method == http.MethodPost && mediaType == "application/json" {
			env, problem := rpcerror.Inspect(body)
			if problem != nil {
				problem.Response(rpcerror.ID(body)).Write(w, http.StatusBadRequest)
				return
			}
			problem = repeatedMember(body, env.Params)
			if problem == nil {
				problem = refusedParams(body, env)
			}
			if problem != nil {
				// Params the SDK cannot read (or naming a member twice)
				// are answered in JSON-RPC, 200; missing ones, or a
				// message naming a member twice, 400.
				status := http.StatusOK
				if problem.RPCCode != rpcerror.CodeInvalidParams {
					status = http.StatusBadRequest
				}
				problem.Response(rpcerror.ID(body)).Write(w, status)
				return
			}
			// After params, as the SDK reads them before its handler finds
			// the method unserved.
			if why := unservedMethod(env.Method, caps); why != "" && env.Call {
				methodUnknown(rpcerror.ID(body), why).Write(w, unknownMethodStatus(r))
				return
			}
			// server/discover is of protocol 2026-07-28, which a request
			// names in params._meta: to any other the SDK's session answers
			// -32601 without data, past every handler's middleware.
			if env.Call && env.Method == "server/discover" && !newProtocol(env.Params) {
				methodUnknown(rpcerror.ID(body), fmt.Sprintf("server/discover is served to a request of protocol %s or later, which params._meta names (%s)",
					protocolStateless, sdk.MetaKeyProtocolVersion)).Write(w, http.StatusOK)
				return
			}
		}
		caught := &refusal{ResponseWriter: w}
		next.ServeHTTP(caught, r)
		switch {
		case caught.status == 0:
		case caught.json:
			s.answerJSONRefusal(w, r, body, caught.status, caught.text.Bytes())
		default:
			s.answerRefusal(w, r, body, caught.status, strings.TrimSpace(caught.text.String()))
		}
	})
}

// repeatedMember refuses a message, valid JSON, that names a member of
// its envelope, or of its params, twice: the SDK keeps the last of the
// two, where a log, a proxy or a gateway's policy may read the first — a
// tools/list that runs tools/call, an order_get that runs cancel_order.
// The arguments' members are the engine's to judge (engine.RepeatedMember).
func repeatedMember(body []byte, params json.RawMessage) *rpcerror.Problem {
	if _, ok := jsonmember.Repeated(body); !ok {
		return nil // no name repeats at any depth: read without allocating
	}
	if name, ok := repeatedName(body); ok {
		return &rpcerror.Problem{RPCCode: rpcerror.CodeInvalidRequest, Code: errcode.MCPInvalidRequest,
			Msg: fmt.Sprintf("the message names the member %q twice", display.Echo(name))}
	}
	if name, ok := repeatedName(params); ok {
		return &rpcerror.Problem{RPCCode: rpcerror.CodeInvalidParams, Code: errcode.MCPInvalidParams,
			Msg: fmt.Sprintf("params names the member %q twice", display.Echo(name))}
	}
	return nil
}

// repeatedName is the first member name the JSON object raw holds twice,
// at its top level; false when none is, or raw is no object.
func repeatedName(raw []byte) (string, bool) {
	seen := map[string]bool{}
	for members := jsonmember.New(raw); members.Scan(); {
		if seen[members.Name()] {
			return members.Name(), true
		}
		seen[members.Name()] = true
	}
	return "", false
}

// refusedParams is paramsProblem of the request in body, which
// rpcerror.Inspect read as env, when the SDK reads body as a request; nil
// when it reads none. The envelope is the SDK's reading of every message
// it reads, member for member (names matched exactly, the last of a
// repeated one), so it judges first, and the SDK's own decoder, whose
// buffers cost more than the rest of the check, is asked only to confirm
// a refusal: whether it reads body at all, where its bounds (a nesting
// deeper than it takes) leave the answer to the SDK.
func refusedParams(body []byte, env rpcerror.Envelope) *rpcerror.Problem {
	if paramsProblem(env.Method, env.Call, env.Params) == nil {
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return nil
	}
	return paramsProblem(req.Method, req.IsCall(), req.Params)
}

// sdkFailed is the answer to the message of id that the SDK failed with
// text, which goes to the host log only, under a correlation id the
// answer names (attrs are the log line's further attributes).
func sdkFailed(ctx context.Context, log *slog.Logger, id json.RawMessage, text string, attrs ...any) *rpcerror.Response {
	correlation := uuid.NewString()
	log.ErrorContext(ctx, "the MCP SDK failed a request", append(attrs, "error", text, "correlation_id", correlation)...)
	answer := rpcerror.New(id, rpcerror.CodeInternalError, errcode.InternalError, "an unexpected internal error; the details are withheld", 0)
	answer.Error.Data.CorrelationID = correlation
	return answer
}

// answerJSONRefusal answers what the SDK refused with status and a
// JSON-RPC error of its own, sdkAnswer. One whose data names a stable code
// already — a tool's refusal, which protocol 2026-07-28 answers 400 — is
// let through as written; any other is given the stable code of its
// JSON-RPC code (codeOfRPC), its code, words, id and status kept, and the
// supported and requested versions of an unsupported protocol version's
// data, which a client negotiates by. One the SDK answers with a code
// codeOfRPC does not hold, or with a 5xx, is answered as a plain refusal
// in its words.
func (s *Server) answerJSONRefusal(w http.ResponseWriter, r *http.Request, body []byte, status int, sdkAnswer []byte) {
	var answer struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(sdkAnswer, &answer) != nil || answer.Error == nil {
		s.answerRefusal(w, r, body, status, clip(string(sdkAnswer)))
		return
	}
	coded, stable := withCode(answer.ID, answer.Error.Code, answer.Error.Message, answer.Error.Data)
	switch {
	case stable:
		w.WriteHeader(status)
		_, _ = w.Write(sdkAnswer)
	case coded == nil || status >= http.StatusInternalServerError:
		s.answerRefusal(w, r, body, status, clip(answer.Error.Message))
	default:
		coded.Write(w, status)
	}
}

// withCode is the answer to the message of id that the SDK refused with
// a JSON-RPC error of its own — code, message and data — given the stable
// code of its code (codeOfRPC), its code and words kept, and the
// supported and requested versions of an unsupported protocol version's
// data, which a client negotiates by. stable reports data that names a
// stable code already (a tool's refusal), to be sent as it is; coded is
// nil then, and when codeOfRPC holds no code for code.
func withCode(id json.RawMessage, code int64, message string, data json.RawMessage) (coded *rpcerror.Response, stable bool) {
	var d struct {
		Code      string   `json:"code"`
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	_ = json.Unmarshal(data, &d) // data of another shape, or none, names no code
	if d.Code != "" {
		return nil, true
	}
	stableCode, ok := codeOfRPC[code]
	if !ok {
		return nil, false
	}
	coded = rpcerror.New(id, int(code), stableCode, clip(message), 0)
	coded.Error.Data.Supported, coded.Error.Data.Requested = d.Supported, d.Requested
	return coded, false
}

// answerRefusal answers in JSON-RPC what the SDK refused with status and
// the plain text sdkText.
func (s *Server) answerRefusal(w http.ResponseWriter, r *http.Request, body []byte, status int, sdkText string) {
	id := rpcerror.ID(body)
	var answer *rpcerror.Response
	switch {
	case status >= http.StatusInternalServerError:
		answer = sdkFailed(r.Context(), s.log, id, sdkText, "status", status)
	case status == http.StatusForbidden:
		// The SDK's localhost protection; behind the front, which refuses
		// the same requests first, it never answers.
		answer = rpcerror.New(id, rpcerror.CodeServerError, errcode.MCPHostRefused, "the Host header names no loopback host, though the request came over loopback", 0)
	case status == http.StatusRequestEntityTooLarge:
		answer = rpcerror.New(id, rpcerror.CodeServerError, errcode.MCPBodyTooLarge, sdkText, s.maxBodyBytes())
	default:
		if method, ok := unknownMethod(body); ok {
			answer = methodUnknown(id, noMethod(method))
			if id != nil {
				status = http.StatusOK
			}
			break
		}
		answer = rpcerror.New(id, rpcerror.CodeInvalidRequest, errcode.MCPInvalidRequest, sdkText, 0)
	}
	answer.Write(w, status)
}

// protocolStateless is the MCP protocol version from which a request
// carries its protocol version and the client's capabilities in
// params._meta, and a method no server serves is answered 404.
const protocolStateless = "2026-07-28"

// unknownMethodStatus is the HTTP status of the answer to r naming a
// method the server does not serve: 404 to a request of
// protocolStateless or later, as that version asks (and the SDK answers
// one); else 200, as any other JSON-RPC error to a request (a strict
// client of those versions reads the code only from a 2xx).
func unknownMethodStatus(r *http.Request) int {
	if r.Header.Get("MCP-Protocol-Version") >= protocolStateless {
		return http.StatusNotFound
	}
	return http.StatusOK
}

// newProtocol reports whether a request's params name, in _meta, a
// protocol version of protocolStateless or later, as the SDK reads them.
func newProtocol(params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	var version string
	return json.Unmarshal(p.Meta[sdk.MetaKeyProtocolVersion], &version) == nil && version >= protocolStateless
}

// unknownMethod returns the method of a request body whose method go-sdk
// does not serve, and reports whether it is one.
func unknownMethod(body []byte) (string, bool) {
	var msg struct {
		Method *string `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method == nil {
		return "", false
	}
	return *msg.Method, !standardMethod(*msg.Method)
}

// unservedMethod says why the server, declaring caps, does not serve
// method, a standard MCP request of a capability it does not declare —
// completion/complete, resources/subscribe where no session lasts
// (stateless HTTP), prompts/* where none are declared — or is "".
func unservedMethod(method string, caps *sdk.ServerCapabilities) string {
	var capability string
	switch {
	case method == "completion/complete" && caps.Completions == nil:
		capability = "completions"
	case (method == "resources/subscribe" || method == "resources/unsubscribe") && (caps.Resources == nil || !caps.Resources.Subscribe):
		capability = "resources.subscribe"
	case strings.HasPrefix(method, "prompts/") && caps.Prompts == nil:
		capability = "prompts"
	case strings.HasPrefix(method, "resources/") && caps.Resources == nil:
		capability = "resources"
	case method == "logging/setLevel" && caps.Logging == nil: //nolint:staticcheck // SA1019: as capabilities
		capability = "logging"
	default:
		return ""
	}
	return fmt.Sprintf("%s: it does not declare the %s capability", noMethod(method), capability)
}

// noMethod says the server serves no method of that name.
func noMethod(method string) string { return fmt.Sprintf("the server serves no method %q", method) }

// methodUnknown is the answer, over either transport, to the request of
// id whose method the server does not serve, why saying so.
func methodUnknown(id json.RawMessage, why string) *rpcerror.Response {
	return rpcerror.New(id, rpcerror.CodeMethodNotFound, errcode.MCPMethodUnknown, why, 0)
}

// standardMethod reports whether go-sdk serves method as a standard MCP
// method. The SDK's table of them is unexported; AddReceivingCustomMethod
// is documented to refuse exactly their names, so a server made for the
// question asks the SDK itself, in step with its version. orangerail adds
// no custom methods.
func standardMethod(method string) bool {
	if _, ok := standardMethods.Load(method); ok {
		return true
	}
	probe := sdk.NewServer(&sdk.Implementation{Name: "probe", Version: "0"}, nil)
	standard := sdk.AddReceivingCustomMethod(probe, method, func(context.Context, *sdk.ServerSession, *probeParams) (*probeResult, error) {
		return &probeResult{}, nil
	}) != nil
	if standard {
		standardMethods.Store(method, true) // a few dozen names at most: the SDK's
	}
	return standard
}

// standardMethods remembers the methods standardMethod found standard,
// so that a message of one costs no probe.
var standardMethods sync.Map

type probeParams struct{ sdk.ParamsBase }

type probeResult struct{ sdk.ResultBase }

// refusal passes an answer through, but holds back one that is a
// refusal: in plain text (http.Error's), its status and, up to maxText,
// its text; in JSON (a JSON-RPC error the SDK writes itself), its status
// and the whole answer, to be read — the SDK wrote it in one piece from
// memory, and it holds no more than the request's method, name and
// headers. A success and a stream pass unheld.
type refusal struct {
	http.ResponseWriter
	status  int  // the refusal's, or 0
	json    bool // whether it is in JSON
	started bool
	text    bytes.Buffer
}

// maxText bounds the SDK's words a refusal answers with.
const maxText = 1 << 10

// clip is text within maxText.
func clip(text string) string {
	if len(text) <= maxText {
		return text
	}
	return strings.ToValidUTF8(text[:maxText], "")
}

func (p *refusal) WriteHeader(status int) {
	if p.started || p.status != 0 {
		return
	}
	mediaType, _, _ := mime.ParseMediaType(p.Header().Get("Content-Type"))
	if status >= http.StatusBadRequest && (mediaType == "text/plain" || mediaType == "application/json") {
		p.status, p.json = status, mediaType == "application/json"
		return
	}
	p.started = true
	p.ResponseWriter.WriteHeader(status)
}

func (p *refusal) Write(b []byte) (int, error) {
	if !p.started && p.status == 0 {
		p.WriteHeader(http.StatusOK)
	}
	switch {
	case p.json:
		p.text.Write(b)
		return len(b), nil
	case p.status != 0:
		p.text.Write(b[:min(len(b), max(0, maxText-p.text.Len()))])
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, for the SDK's streams.
func (p *refusal) Flush() {
	if p.status != 0 {
		return
	}
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		p.started = true
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer beneath.
func (p *refusal) Unwrap() http.ResponseWriter { return p.ResponseWriter }
