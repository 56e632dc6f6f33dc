package mcp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// MaxPromptArgumentChars bounds one argument's value in prompts/get: a
// prompt's message is for a person to send, not a channel for documents.
const MaxPromptArgumentChars = 8192

// visiblePrompts lists the prompts caller is offered, by name, sorted: the
// engine's audience gate, as for tools.
func (s *Server) visiblePrompts(caller *engine.Caller) []string {
	var names []string
	for _, name := range s.promptNames {
		if s.engine.SeesPrompt(caller, name) {
			names = append(names, name)
		}
	}
	return names
}

// addPrompts adds the named prompts to srv. A prompt left out is answered
// by promptsHeld as one that does not exist, so hidden and nonexistent are
// one answer; the handler asks the gate again for the request's caller,
// and answers the same.
func (s *Server) addPrompts(srv *sdk.Server, names []string, fixed *engine.Caller) {
	for _, name := range names {
		p := s.cfg.Prompts[name]
		def := &sdk.Prompt{Name: name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			def.Arguments = append(def.Arguments, &sdk.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		srv.AddPrompt(def, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			caller := fixed
			if caller == nil && req.Extra != nil {
				caller = callerOfInfo(req.Extra.TokenInfo)
			}
			if caller == nil || !s.engine.SeesPrompt(caller, name) {
				return nil, unknownPrompt(name)
			}
			if err := promptArguments(name, def, req.Params.Arguments); err != nil {
				return nil, err
			}
			return &sdk.GetPromptResult{Description: p.Description, Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.TextContent{Text: p.Render(req.Params.Arguments)}},
			}}, nil
		})
	}
}

// unknownPrompt is the answer to a prompts/get of a prompt the caller is
// not offered — none of the name exists, or the caller is outside its
// audience — the same for both: the SDK's answer for a prompt it does not
// hold, with the stable code in the error's data, as unknownTool's.
func unknownPrompt(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name), Data: unknownPromptData}
}

var unknownPromptData = mustJSON(map[string]string{"code": string(errcode.MCPPromptUnknown)})

// promptsHeld answers a prompts/get of a prompt this server does not hold
// as the handlers answer a hidden one (unknownPrompt), where the SDK would
// answer without the code.
func promptsHeld(names []string) sdk.Middleware {
	held := make(map[string]bool, len(names))
	for _, name := range names {
		held[name] = true
	}
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if get, ok := req.(*sdk.GetPromptRequest); ok && method == "prompts/get" && get.Params != nil && !held[get.Params.Name] {
				return nil, unknownPrompt(get.Params.Name)
			}
			return next(ctx, method, req)
		}
	}
}

// promptArguments refuses arguments the prompt does not take: a required
// one missing or empty, one it does not declare, or a value too long —
// every problem named at once, under X_MCP_PROMPT_ARGUMENTS_INVALID.
func promptArguments(name string, def *sdk.Prompt, args map[string]string) error {
	declared := map[string]bool{}
	var problems []string
	for _, a := range def.Arguments {
		declared[a.Name] = true
		if a.Required && args[a.Name] == "" {
			problems = append(problems, fmt.Sprintf("%s is required", a.Name))
		}
	}
	for _, given := range slices.Sorted(maps.Keys(args)) {
		switch {
		case !declared[given]:
			// The caller's own name, echoed bounded: no longer a message
			// than a name of this prompt's would make, nor one that spells
			// a newline or a quote into the host log's line.
			problems = append(problems, fmt.Sprintf("%q is not an argument of this prompt", display.Echo(given)))
		case utf8.RuneCountInString(args[given]) > MaxPromptArgumentChars:
			problems = append(problems, fmt.Sprintf("%s is longer than %d characters", given, MaxPromptArgumentChars))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	entry, _ := errcode.Explain(string(errcode.MCPPromptArgumentsInvalid))
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("%s: prompt %q: %s. Fix: %s", errcode.MCPPromptArgumentsInvalid, name, strings.Join(problems, "; "), entry.Fix),
		Data:    mustJSON(map[string]any{"code": string(errcode.MCPPromptArgumentsInvalid), "problems": problems})}
}
