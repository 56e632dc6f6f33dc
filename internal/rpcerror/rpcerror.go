// Package rpcerror is the one shape of the JSON-RPC errors orangerail
// answers outside a method's own result: the HTTP front's refusals, and the
// MCP transports' answers to messages the SDK cannot take (not JSON, not a
// JSON-RPC message, an unknown method, params it cannot read, a line too
// long). Each carries the request's id when it could be read (null only
// when none could), and data naming its stable code, the code's cause and
// fix, and the bound that was hit. It also reads a message as far as those answers need: its id, and
// whether it is one JSON-RPC message at all.
package rpcerror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
)

// The JSON-RPC 2.0 error codes these answers use.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeServerError is the server-defined code (-32000 to -32099) of a
	// refusal that is not about the message itself: no token, a rate, an
	// origin.
	CodeServerError = -32000
)

// Data is an error's data member: the stable code, and what the code's
// entry in errcode says of it.
type Data struct {
	Code  errcode.Code `json:"code"`
	Cause string       `json:"cause"`
	Fix   string       `json:"fix"`
	// Limit is the bound that was hit — bytes of a body, calls a minute —
	// or zero (absent) when the refusal hit none.
	Limit int64 `json:"limit,omitempty"`
	// CorrelationID is where an operator finds the refusal's cause in the
	// host log, when it has one there.
	CorrelationID string `json:"correlationId,omitempty"`
	// Supported and Requested are, of a protocol version the server does
	// not serve, the versions it does and the one the request named: MCP's
	// UnsupportedProtocolVersionData, by which a client picks another.
	Supported []string `json:"supported,omitempty"`
	Requested string   `json:"requested,omitempty"`
}

// DataOf is the data of a refusal under code; limit as Data.Limit.
func DataOf(code errcode.Code, limit int64) Data {
	entry, _ := errcode.Explain(string(code))
	return Data{Code: code, Cause: entry.Cause, Fix: entry.Fix, Limit: limit}
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    Data   `json:"data"`
}

// Response is a JSON-RPC error response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   Error           `json:"error"`
}

// New returns the error response to the message of id (nil: null) under
// rpcCode, whose message is code and msg and whose data is DataOf(code,
// limit).
func New(id json.RawMessage, rpcCode int, code errcode.Code, msg string, limit int64) *Response {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &Response{JSONRPC: "2.0", ID: id, Error: Error{Code: rpcCode, Message: Message(code, msg), Data: DataOf(code, limit)}}
}

// Message is the error message of a refusal: its code, then what went
// wrong.
func Message(code errcode.Code, msg string) string { return fmt.Sprintf("%s: %s", code, msg) }

// Write answers an HTTP request with status and the response as JSON.
func (r *Response) Write(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(r)
}

// ID returns the id member of the JSON-RPC message body begins with — a
// string or a number, as sent — or nil when none can be read: body is not
// an object, holds no id before it ends or breaks off, holds two, or its id
// is null or of another type. body may be a prefix of the message (a body
// cut at a size limit): an id is read if it is whole before the cut. Every
// member but the id is skipped unread.
func ID(body []byte) json.RawMessage {
	var id json.RawMessage
	for members := jsonmember.New(body); members.Scan(); {
		if members.Name() != "id" {
			continue
		}
		// A number at the very end of a prefix may be cut short: only one
		// followed by more of the body is whole.
		value := members.Value()
		if id != nil || members.Offset() >= int64(len(body)) || !isID(value) {
			return nil
		}
		id = value
	}
	return id
}

// isID reports whether a JSON value is a string or a number.
func isID(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// maxNumberID is the largest number id answered under itself: go-sdk
// reads an id as a float64 and answers under its int64, so past 2^53 an
// id loses digits, and past int64 it overflows.
const maxNumberID = 1 << 53

// answerableID reports whether a number id is one go-sdk answers under
// the same id: an integer, spelled as Go formats it, within ±maxNumberID.
// Any other (1.5, 1e3, -0, 1e999) it answers under another id (1, 1000,
// 0) or refuses with its decoder's words; JSON-RPC 2.0 asks for no
// fractional part.
func answerableID(v json.RawMessage) bool {
	text := string(bytes.TrimSpace(v))
	n, err := strconv.ParseInt(text, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == text && n >= -maxNumberID && n <= maxNumberID
}

// answerableStringID reports whether a string id, a JSON string of a
// valid JSON text, is one go-sdk answers under the same id: one that
// decodes to the characters it spells. Bytes that are not UTF-8, and a
// \u escape of a surrogate not paired with another, it reads as U+FFFD —
// another id, which two such ids may share.
func answerableStringID(v json.RawMessage) bool {
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); {
		switch c := inner[i]; {
		case c == '\\' && inner[i+1] == 'u':
			r := hex4(inner[i+2 : i+6])
			i += 6
			if !utf16.IsSurrogate(r) {
				continue
			}
			if r >= 0xDC00 || i+6 > len(inner) || inner[i] != '\\' || inner[i+1] != 'u' {
				return false // a low surrogate first, or a high one alone
			}
			if low := hex4(inner[i+2 : i+6]); low < 0xDC00 || low > 0xDFFF {
				return false
			}
			i += 6
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		}
	}
	return true
}

// hex4 is the code unit four hexadecimal digits spell.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 16)
	return rune(n)
}

// Problem is why a message is not one JSON-RPC message to hand on: its
// JSON-RPC code, stable code and what is wrong.
type Problem struct {
	RPCCode int
	Code    errcode.Code
	Msg     string
}

// Response is the answer to a message of id refused for the problem.
func (p *Problem) Response(id json.RawMessage) *Response {
	return New(id, p.RPCCode, p.Code, p.Msg, 0)
}

// IsBatch reports whether body is a JSON-RPC batch: a JSON array.
func IsBatch(body []byte) bool {
	trimmed := bytes.TrimSpace(body)
	return len(trimmed) > 0 && trimmed[0] == '['
}

// ErrBatch is the problem of a batch: orangerail accepts one message at a
// time, whatever the protocol version.
var ErrBatch = &Problem{RPCCode: CodeInvalidRequest, Code: errcode.MCPProtocol, Msg: "JSON-RPC batches are not accepted"}

// Check reads body as one JSON-RPC 2.0 message and returns, when it is
// not one, the problem: not JSON (parse error), a batch, or JSON that is
// neither a request nor a response (invalid request). It checks the
// envelope only — the method, params and whether an id belongs are the
// receiver's to judge — so that a message it passes is one the MCP SDK
// reads rather than refuses as malformed. The answer's id is ID(body).
func Check(body []byte) *Problem {
	_, problem := Inspect(body)
	return problem
}

// Envelope is what Inspect read of a message that is one: the members a
// receiver judges further, as the MCP SDK reads them (member names
// matched exactly, the last of a repeated one).
type Envelope struct {
	// Method is a request's method; "" for a response.
	Method string
	// Call reports whether the message carries an id that is not null:
	// of a request, that it is a call, not a notification.
	Call bool
	// Params is the params member as sent; nil when absent.
	Params json.RawMessage
}

// Inspect is Check, and returns the envelope it read of a message it
// passes, so that a receiver judging the method or params reads the body
// once. It reads a message as encoding/json's Unmarshal into a map of raw
// members would (FuzzInspect holds it to that), at a fraction of the cost:
// it runs on every message of every door.
func Inspect(body []byte) (Envelope, *Problem) {
	invalid := func(msg string) *Problem {
		return &Problem{RPCCode: CodeInvalidRequest, Code: errcode.MCPInvalidRequest, Msg: msg}
	}
	// json.Valid is the scan Unmarshal makes before it decodes any of it:
	// a text it refuses (too deeply nested too) is a body that is not
	// JSON; any other that is no object is JSON that is no message.
	if !json.Valid(body) {
		return Envelope{}, &Problem{RPCCode: CodeParseError, Code: errcode.MCPParseError, Msg: "the message is not JSON"}
	}
	if IsBatch(body) {
		return Envelope{}, ErrBatch
	}
	msg, ok := topMembers(body)
	if !ok {
		return Envelope{}, invalid("the message is not a JSON object")
	}
	if v := msg.jsonrpc; v == nil || !bytes.Equal(v, []byte(`"2.0"`)) {
		return Envelope{}, invalid(`"jsonrpc" must be "2.0"`)
	}
	rawID, hasID := msg.id, msg.id != nil
	if hasID && !isID(rawID) && !isNull(rawID) {
		return Envelope{}, invalid(`"id" must be a string or a number`)
	}
	if hasID && isID(rawID) && rawID[0] != '"' && !answerableID(rawID) {
		return Envelope{}, invalid(fmt.Sprintf(`a number "id" must be an integer of at most %d in magnitude, written as one`, maxNumberID))
	}
	if hasID && isID(rawID) && rawID[0] == '"' && !answerableStringID(rawID) {
		return Envelope{}, invalid(`a string "id" must be UTF-8 with no lone surrogate (\uD800 to \uDFFF unpaired): the server would read it as another string, and answer under an id the client never sent`)
	}
	env := Envelope{Call: hasID && !isNull(rawID), Params: msg.params}
	if method := msg.method; method != nil {
		if method[0] != '"' {
			return Envelope{}, invalid(`"method" must be a string`)
		}
		if hasID && isNull(rawID) {
			// MCP: a request's id must not be null. Read as a
			// notification, it would be run unanswered (stdio) or refused
			// in the SDK's words (HTTP).
			return Envelope{}, invalid(`a request's "id" must not be null: a request carries a string or a number, and a notification no "id" at all`)
		}
		env.Method = jsonString(method)
		return env, nil
	}
	result, failed := msg.result != nil, msg.error != nil
	if !hasID || isNull(rawID) || result == failed {
		return Envelope{}, invalid(`the message is neither a request ("method" is missing) nor a response (an "id" and a "result" or an "error")`)
	}
	return env, nil
}

// envelopeMembers are the members of a message Inspect reads, each its
// value as sent (a slice of the body), nil when absent.
type envelopeMembers struct {
	jsonrpc, id, method, params, result, error json.RawMessage
}

// topMembers reads the members of body, a valid JSON text, when it is an
// object: of a repeated name, the last; a name matched exactly, once its
// escapes are decoded. ok is false for a text that is no object.
func topMembers(body []byte) (m envelopeMembers, ok bool) {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return m, false
	}
	i = skipSpace(body, i+1)
	for i < len(body) && body[i] == '"' {
		quoted := body[i:stringEnd(body, i)]
		start := skipSpace(body, skipSpace(body, i+len(quoted))+1) // past the colon
		i = valueEnd(body, start)
		name := quoted[1 : len(quoted)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var decoded string
			_ = json.Unmarshal(quoted, &decoded) // a string of valid JSON: it decodes
			name = []byte(decoded)
		}
		m.set(name, body[start:i])
		i = skipSpace(body, i)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return m, true
}

// set keeps value as the member named name, when it is one Inspect reads.
func (m *envelopeMembers) set(name []byte, value json.RawMessage) {
	switch string(name) {
	case "jsonrpc":
		m.jsonrpc = value
	case "id":
		m.id = value
	case "method":
		m.method = value
	case "params":
		m.params = value
	case "result":
		m.result = value
	case "error":
		m.error = value
	}
}

// The scanners below read a valid JSON text: each returns the index past
// what it skips.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd skips the string that starts at b[i], its quotes included.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; a \u's hex digits are no quote
		case '"':
			return i + 1
		}
	}
	return i
}

// valueEnd skips the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// jsonString decodes a string of a valid JSON text: a method name has
// no escape and is valid UTF-8, and is its bytes between the quotes; any
// other is decoded as encoding/json decodes it (invalid UTF-8 replaced).
func jsonString(v json.RawMessage) string {
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(v, &s) // a string of valid JSON: it decodes
	return s
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }
