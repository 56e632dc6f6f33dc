package mcp

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
)

// VerifyFunc resolves a bearer token to its caller. It returns an error for
// a token it does not accept; the error's text never reaches the client.
type VerifyFunc func(ctx context.Context, token string, r *http.Request) (*engine.Caller, error)

// HTTPHandler serves Streamable HTTP for callers whose bearer tokens verify
// answers. It is stateless: each request is answered by the server of its
// own caller's catalog, and each tool call is authorized for that caller.
func (s *Server) HTTPHandler(verify VerifyFunc) http.Handler {
	tokens := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		caller, err := verify(ctx, token, r)
		if err != nil || caller == nil {
			return nil, auth.ErrInvalidToken // its text is all the client sees
		}
		return &auth.TokenInfo{UserID: caller.Subject, Scopes: caller.Scopes, Extra: map[string]any{callerKey: caller}}, nil
	}
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		info := auth.TokenInfoFromContext(r.Context())
		if info == nil {
			return nil
		}
		caller, _ := info.Extra[callerKey].(*engine.Caller)
		if caller == nil {
			return nil
		}
		return s.forCaller(caller)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	// Expiry is the verifier's to check: it knows the token's format.
	return auth.RequireBearerToken(tokens, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
}
