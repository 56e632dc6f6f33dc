package rpcerror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/errcode"
)

// TestID reads the id a body begins with, whole or cut at a limit, and
// none where it cannot be told.
func TestID(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`:            `7`,
		`{"id":"a\"b","params":{"id":1}}`:                     `"a\"b"`,
		` { "id" : -1.5e3 } `:                                 `-1.5e3`,
		`{"jsonrpc":"2.0","id":12345,"params":{"x":"cut here`: `12345`,
		`{"jsonrpc":"2.0","id":12`:                            ``, // the number may go on past the cut
		`{"jsonrpc":"2.0","id":"ab`:                           ``,
		`{"params":{"x":"cut before the id`:                   ``,
		`{"id":1,"id":2}`:                                     ``, // which one?
		`{"id":null}`:                                         ``,
		`{"id":true}`:                                         ``,
		`{"id":{"a":1}}`:                                      ``,
		`[{"id":1}]`:                                          ``,
		`not json`:                                            ``,
		``:                                                    ``,
	} {
		if got := string(ID([]byte(body))); got != want {
			t.Errorf("ID(%s) = %q, want %q", body, got, want)
		}
	}
}

// TestCheck tells a JSON-RPC message from what is none, by the envelope.
func TestCheck(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]errcode.Code{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`:         "",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`: "",
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                   "",
		`{"jsonrpc":"2.0","id":"x","error":{"code":1}}`:          "",
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`:            errcode.MCPInvalidRequest, // MCP: never null
		`{"jsonrpc":"2.0","id":null,"result":{}}`:                errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} x`:             errcode.MCPParseError,
		``: errcode.MCPParseError,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`: errcode.MCPProtocol,
		`17`:                                     errcode.MCPInvalidRequest,
		`{"id":1,"method":"ping"}`:               errcode.MCPInvalidRequest,
		`{"jsonrpc":2.0,"id":1,"method":"ping"}`: errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`:      errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"method":null}`:          errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1}`:                        errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","result":{}}`:                   errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`: errcode.MCPInvalidRequest,
		// A number id go-sdk would answer under another id, or refuse in
		// its decoder's words.
		`{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}`: "",
		`{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`:  "",
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`:  errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`:               errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`:               errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`:                errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":1e999,"method":"ping"}`:             errcode.MCPInvalidRequest,
		`{"jsonrpc":"2.0","id":2.0,"result":{}}`:                   errcode.MCPInvalidRequest,
	} {
		p := Check([]byte(body))
		var got errcode.Code
		if p != nil {
			got = p.Code
		}
		if got != want {
			t.Errorf("Check(%s) = %q, want %q", body, got, want)
		}
	}
}

// TestInspect reads the envelope of a message Check passes: the method,
// whether it is a call, the params as sent — of a repeated member, the
// last, and a name matched exactly, as the MCP SDK reads them.
func TestInspect(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]Envelope{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`:        {Method: "tools/call", Call: true, Params: []byte(`{"name":"a"}`)},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                      {Method: "notifications/initialized"},
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`:                      {Method: "ping", Call: true, Params: []byte(`null`)},
		`{"jsonrpc":"2.0","id":"","method":"ping"}`:                                   {Method: "ping", Call: true},
		`{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools\/call","Params":5}`:             {Method: "tools/call", Call: true},
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"x","params":1,"params":2}`: {Method: "x", Call: true, Params: []byte(`2`)},
		`{"jsonrpc":"2.0","id":null,"id":1,"method":"ping"}`:                          {Method: "ping", Call: true},
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                                        {Call: true},
		"{\"jsonrpc\":\"2.0\",\"method\":\"a\xffb\"}":                                 {Method: "a\uFFFDb"},
		`{"jsonrpc":"2.0","method":"a\u00e9\"b"}`:                                     {Method: "aé\"b"},
	} {
		got, problem := Inspect([]byte(body))
		if problem != nil || got.Method != want.Method || got.Call != want.Call || string(got.Params) != string(want.Params) {
			t.Errorf("Inspect(%s) = %+v, %v; want %+v", body, got, problem, want)
		}
	}
}

// FuzzInspect holds Inspect to the reading it replaced, which decoded the
// body with encoding/json into a map of raw members: the same problem for
// every body, and for a message, the same envelope.
func FuzzInspect(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"s":"}\"]"}}}`,
		`{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools\/call","Params":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"x","params":1,"params":2}`,
		` { "jsonrpc" : "2.0" , "id" : null , "method" : "ping" , "params" : [ 1 , { } ] } `,
		`{"jsonrpc":"2.0","id":"x","error":{"code":1}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"a\xffb\",\"i\xffd\":1}",
		`{"\u006asonrpc":"2.0","\"id":1,"method":"a\u00e9\"b"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`,
		`{"jsonrpc":"2.0","id":"\ud83d\ude00\u00e9\/","method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`null`, `17`, `"x"`, `{}`, ``, `{"a":}`, `{"jsonrpc":"2.0"} x`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, problem := Inspect(body)
		wantEnv, wantProblem := inspectByUnmarshal(body)
		if (problem == nil) != (wantProblem == nil) || problem != nil && *problem != *wantProblem {
			t.Fatalf("Inspect(%q): problem %+v, want %+v", body, problem, wantProblem)
		}
		if env.Method != wantEnv.Method || env.Call != wantEnv.Call || !bytes.Equal(env.Params, wantEnv.Params) || (env.Params == nil) != (wantEnv.Params == nil) {
			t.Fatalf("Inspect(%q) = %+v, want %+v", body, env, wantEnv)
		}
	})
}

// inspectByUnmarshal is Inspect as it read a message before it scanned
// one: the reference FuzzInspect holds it to.
func inspectByUnmarshal(body []byte) (Envelope, *Problem) {
	invalid := func(msg string) *Problem {
		return &Problem{RPCCode: CodeInvalidRequest, Code: errcode.MCPInvalidRequest, Msg: msg}
	}
	var msg map[string]json.RawMessage
	err := json.Unmarshal(body, &msg)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return Envelope{}, &Problem{RPCCode: CodeParseError, Code: errcode.MCPParseError, Msg: "the message is not JSON"}
	case IsBatch(body):
		return Envelope{}, ErrBatch
	case err != nil || msg == nil:
		return Envelope{}, invalid("the message is not a JSON object")
	}
	if v, ok := msg["jsonrpc"]; !ok || !bytes.Equal(bytes.TrimSpace(v), []byte(`"2.0"`)) {
		return Envelope{}, invalid(`"jsonrpc" must be "2.0"`)
	}
	rawID, hasID := msg["id"]
	if hasID && !isID(rawID) && !isNull(rawID) {
		return Envelope{}, invalid(`"id" must be a string or a number`)
	}
	if hasID && isID(rawID) && rawID[0] != '"' && !answerableID(rawID) {
		return Envelope{}, invalid(fmt.Sprintf(`a number "id" must be an integer of at most %d in magnitude, written as one`, maxNumberID))
	}
	if hasID && isID(rawID) && rawID[0] == '"' {
		var id string
		_ = json.Unmarshal(rawID, &id)
		if again, _ := json.Marshal(id); !jsonStringsEqual(rawID, again) {
			return Envelope{}, invalid(`a string "id" must be UTF-8 with no lone surrogate (\uD800 to \uDFFF unpaired): the server would read it as another string, and answer under an id the client never sent`)
		}
	}
	env := Envelope{Call: hasID && !isNull(rawID), Params: msg["params"]}
	if method, ok := msg["method"]; ok {
		if len(method) == 0 || method[0] != '"' {
			return Envelope{}, invalid(`"method" must be a string`)
		}
		if hasID && isNull(rawID) {
			return Envelope{}, invalid(`a request's "id" must not be null: a request carries a string or a number, and a notification no "id" at all`)
		}
		env.Method = jsonString(method)
		return env, nil
	}
	_, result := msg["result"]
	_, failed := msg["error"]
	if !hasID || isNull(rawID) || result == failed {
		return Envelope{}, invalid(`the message is neither a request ("method" is missing) nor a response (an "id" and a "result" or an "error")`)
	}
	return env, nil
}

// jsonStringsEqual reports whether two JSON strings spell the same UTF-16
// code units: the reference answerableStringID is held to. A string
// encoding/json decoded with a replacement (U+FFFD) spells other units
// than the one it was read from.
func jsonStringsEqual(a, b []byte) bool {
	units := func(s []byte) []uint16 {
		var out []uint16
		inner := s[1 : len(s)-1]
		for i := 0; i < len(inner); {
			switch c := inner[i]; {
			case c == '\\' && inner[i+1] == 'u':
				n, _ := strconv.ParseUint(string(inner[i+2:i+6]), 16, 16)
				out = append(out, uint16(n))
				i += 6
			case c == '\\':
				out = append(out, uint16(map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[inner[i+1]]))
				i += 2
			default:
				r, n := utf8.DecodeRune(inner[i:])
				if r == utf8.RuneError && n == 1 {
					out = append(out, 0xFFFF) // no code unit: not UTF-8
				} else {
					out = append(out, utf16.Encode([]rune{r})...)
				}
				i += n
			}
		}
		return out
	}
	return slices.Equal(units(a), units(b))
}
