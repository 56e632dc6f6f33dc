package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	sdkjson "github.com/segmentio/encoding/json"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/rpcerror"
)

// paramShape is what a request of one method carries as "params": the
// SDK's type for them, and whether they may be absent or null.
type paramShape struct {
	typ      reflect.Type
	optional bool
}

func shapeOf[T any](optional bool) paramShape {
	return paramShape{typ: reflect.TypeFor[T](), optional: optional}
}

// paramShapes are the params of each request method go-sdk decodes before
// serving it (its serverMethodInfos), as go-sdk v1 types them: which may be
// absent is its missingParamsOK. A method not here is the SDK's to judge.
// Notifications are not here: JSON-RPC answers none, and the SDK accepts
// (over HTTP, 202) and drops one whose params it cannot read.
var paramShapes = map[string]paramShape{
	"initialize":               shapeOf[sdk.InitializeParams](false),
	"ping":                     shapeOf[sdk.PingParams](true),
	"tools/list":               shapeOf[sdk.ListToolsParams](true),
	"tools/call":               shapeOf[sdk.CallToolParamsRaw](false),
	"prompts/list":             shapeOf[sdk.ListPromptsParams](true),
	"prompts/get":              shapeOf[sdk.GetPromptParams](false),
	"resources/list":           shapeOf[sdk.ListResourcesParams](true),
	"resources/templates/list": shapeOf[sdk.ListResourceTemplatesParams](true),
	"resources/read":           shapeOf[sdk.ReadResourceParams](false),
	"resources/subscribe":      shapeOf[sdk.SubscribeParams](false),
	"resources/unsubscribe":    shapeOf[sdk.UnsubscribeParams](false),
	"completion/complete":      shapeOf[sdk.CompleteParams](false),
	"logging/setLevel":         shapeOf[sdk.SetLoggingLevelParams](false), //nolint:staticcheck // SA1019: logging is served through its deprecation window (see capabilities)
	"server/discover":          shapeOf[sdk.DiscoverParams](true),
	"subscriptions/listen":     shapeOf[sdk.SubscriptionsListenParams](false),
}

// paramsProblem is the one check of a request's params, for HTTP
// (answerJSONRPC) and stdio (judgeLine) alike: the problem of a request
// — its method, whether it is a call, its params — whose params go-sdk
// would refuse to decode — absent or null where its method needs them
// (-32600 X_MCP_INVALID_REQUEST, as the SDK answers), or not of the
// method's shape (-32602 X_MCP_INVALID_PARAMS) — or nil.
// The SDK's own answer to the latter names its Go types and carries no
// code; this one names the first offending member by its path in the
// protocol's terms ("params.name must be a string").
//
// Whether params are refused is decided by decoding them as the SDK does
// (its decoder, matching member names exactly, into its types), so that
// nothing the SDK takes is refused; only the words are this package's.
func paramsProblem(method string, call bool, params json.RawMessage) *rpcerror.Problem {
	shape, ok := paramShapes[method]
	if !ok || !call {
		return nil
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		if shape.optional {
			return nil
		}
		return &rpcerror.Problem{RPCCode: rpcerror.CodeInvalidRequest, Code: errcode.MCPInvalidRequest,
			Msg: fmt.Sprintf(`%s requires "params", an object`, method)}
	}
	if decodes(params, shape.typ) {
		return nil
	}
	return &rpcerror.Problem{RPCCode: rpcerror.CodeInvalidParams, Code: errcode.MCPInvalidParams,
		Msg: fmt.Sprintf("%s: %s", method, wrongMember("params", params, shape.typ))}
}

// decodes reports whether go-sdk decodes raw, one JSON value, into a
// value of t: with its decoder, which matches member names
// case-sensitively (Parse is what its Decoder.Decode calls, without the
// read buffer). The SDK also bounds params' nesting at 1000 levels: a
// refusal of params past it is left to the SDK (refusedParams), and
// rpcerror.Inspect has refused any message nested past encoding/json's
// bound (10000) before params are decoded here.
func decodes(raw []byte, t reflect.Type) bool {
	_, err := sdkjson.Parse(raw, reflect.New(t).Interface(), sdkjson.DontMatchCaseInsensitiveStructFields)
	return err == nil
}

// wrongMember says what is wrong with raw, the value at path, which does
// not decode into t: the deepest member that does not decode and what it
// must be, in JSON's terms.
func wrongMember(path string, raw []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A type that reads itself (a completion's ref, inputResponses) is
	// walked as its Go shape, which is its wire shape; what its own rules
	// refuse is "not valid" where no member is wrong.
	kind := jsonKind(raw)
	switch t.Kind() {
	case reflect.Struct:
		if kind != '{' {
			return path + " must be an object"
		}
		fields := jsonFields(t)
		var problem string
		eachMember(raw, func(name string, value []byte) bool {
			if ft, ok := fields[name]; ok && !decodes(value, ft) {
				problem = wrongMember(path+memberPath(name), value, ft)
				return false
			}
			return true
		})
		if problem != "" {
			return problem
		}
	case reflect.Map:
		if kind != '{' {
			return path + " must be an object"
		}
		var problem string
		eachMember(raw, func(name string, value []byte) bool {
			if !decodes(value, t.Elem()) {
				problem = wrongMember(path+memberPath(name), value, t.Elem())
				return false
			}
			return true
		})
		if problem != "" {
			return problem
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return path + " must be a base64 string"
		}
		if kind != '[' {
			return path + " must be an array"
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			for i, item := range items {
				if !decodes(item, t.Elem()) {
					return wrongMember(path+"["+strconv.Itoa(i)+"]", item, t.Elem())
				}
			}
		}
	case reflect.String:
		return path + " must be a string"
	case reflect.Bool:
		return path + " must be true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return path + " must be an integer in range"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return path + " must be a non-negative integer in range"
	case reflect.Float32, reflect.Float64:
		return path + " must be a number"
	}
	return path + " is not valid"
}

// jsonKind is the first byte of a JSON value: '{', '[', '"', 't', 'f',
// 'n', or a number's first.
func jsonKind(raw []byte) byte {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// jsonFields maps the member names a struct of type t decodes to the
// types they decode into: its fields by their json tags (or Go names),
// and those of structs it embeds untagged.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" && tag == "-":
			continue
		case f.Anonymous && name == "" && (f.Type.Kind() == reflect.Struct ||
			f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct):
			continue // its fields are visible themselves
		case name == "":
			name = f.Name
		}
		if _, taken := fields[name]; !taken || len(f.Index) == 1 {
			fields[name] = f.Type
		}
	}
	return fields
}

// eachMember calls f with each member of the JSON object raw, in order,
// until f returns false.
func eachMember(raw []byte, f func(name string, value []byte) bool) {
	for members := jsonmember.New(raw); members.Scan(); {
		if !f(members.Name(), members.Value()) {
			return
		}
	}
}

var plainName = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// memberPath is how a member's name extends a path: .name when plain,
// else ["name"]; a name longer than 64 characters is cut.
func memberPath(name string) string {
	if plainName.MatchString(name) && len(name) <= 64 {
		return "." + name
	}
	return "[" + strconv.Quote(display.Echo(name)) + "]"
}
