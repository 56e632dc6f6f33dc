package mcp

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/orangerail/orangerail/internal/rpcerror"
)

// TestParamShapesAreTheSDKs: every method whose params are checked is one
// go-sdk serves, spelled as it spells it — a misspelt one would check
// nothing.
func TestParamShapesAreTheSDKs(t *testing.T) {
	t.Parallel()
	for method := range paramShapes {
		if !standardMethod(method) {
			t.Errorf("%s is no method go-sdk serves", method)
		}
	}
}

// TestEnvelopeIsTheSDKsReading: of every message rpcerror.Inspect passes
// that go-sdk reads as a request, the envelope is the SDK's reading —
// method, call, params — so that refusedParams judges what the SDK would
// serve, repeated and escaped member names included.
func TestEnvelopeIsTheSDKsReading(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":5,"params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":5}`,
		`{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools/call","p\u0061rams":5}`,
		`{"jsonrpc":"2.0","id":1,"id":"x","method":"tools/call","params":5}`,
		`{"jsonrpc":"2.0","id":null,"id":1,"method":"tools/call","params":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/call\u0000","params":null}`,
		`{"jsonrpc":"2.0","id":"","method":"tools/call","params":  {"name": 1 } }`,
		`{"jsonrpc":"2.0","id":0,"method":"tools/call","Params":5}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\xff\",\"params\":5}",
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
	} {
		env, problem := rpcerror.Inspect([]byte(body))
		if problem != nil {
			t.Fatalf("Inspect(%s): %s", body, problem.Msg)
		}
		msg, err := jsonrpc.DecodeMessage([]byte(body))
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok {
			t.Fatalf("the SDK reads no request in %s: %v", body, err)
		}
		if env.Method != req.Method || env.Call != req.IsCall() || string(env.Params) != string(req.Params) {
			t.Errorf("%s: envelope %q %v %s, the SDK's %q %v %s", body, env.Method, env.Call, env.Params, req.Method, req.IsCall(), req.Params)
		}
	}
}

// TestRefusedParamsPastTheSDKsBound: params nested deeper than go-sdk
// reads are not refused by their shape, which the envelope alone would
// refuse: the SDK refuses the message itself (answerRefusal).
func TestRefusedParamsPastTheSDKsBound(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + deep + `}}`)
	env, problem := rpcerror.Inspect(body)
	if problem != nil {
		t.Fatal(problem.Msg)
	}
	if paramsProblem(env.Method, env.Call, env.Params) == nil {
		t.Fatal("the envelope's params are refused by their shape")
	}
	if problem := refusedParams(body, env); problem != nil {
		t.Errorf("refused %q; the SDK reads no message, and answers it", problem.Msg)
	}
	shallow := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":[[1]]}}`)
	env, _ = rpcerror.Inspect(shallow)
	if problem := refusedParams(shallow, env); problem == nil || problem.Msg != "tools/call: params.name must be a string" {
		t.Errorf("refusedParams(%s) = %v", shallow, problem)
	}
}
