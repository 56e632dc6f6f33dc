package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/rpcerror"
)

// Resolver verifies a bearer token and maps its claims to a caller, as
// identity.Resolver does. A refusal of the token itself wraps
// identity.ErrInvalidToken; any other error means the token could not be
// checked.
type Resolver interface {
	Resolve(ctx context.Context, token string) (*identity.Caller, error)
}

// Authenticator verifies bearer tokens for HTTP: go-sdk's
// auth.RequireBearerToken with a TokenVerifier that asks a Resolver. It is
// the one verification of a request: the caller it verifies travels in the
// request's context as go-sdk's auth.TokenInfo, and the tool handlers
// authorize on req.Extra.TokenInfo. It is safe for concurrent use.
type Authenticator struct {
	resolver Resolver
	// verified is RequireBearerToken around a handler that records the
	// request it lets through, with its TokenInfo, in the attempt.
	verified http.Handler
}

// NewAuthenticator returns an Authenticator asking r.
func NewAuthenticator(r Resolver) *Authenticator {
	a := &Authenticator{resolver: r}
	a.verified = a.require(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if at, ok := r.Context().Value(attemptKey{}).(*attempt); ok {
			at.verified = r
		}
	}))
	return a
}

// attempt is one Authenticate call: what the verifier and the handler
// behind RequireBearerToken saw.
type attempt struct {
	caller   *identity.Caller
	err      error
	verified *http.Request
}

type attemptKey struct{}

// Authenticate verifies r's bearer token, once. On success it returns the
// caller and r as RequireBearerToken passed it on, carrying the
// TokenInfo the MCP handler serves; it writes nothing, so the front
// answers a refusal in its own words. A refused token's error wraps
// identity.ErrInvalidToken, as does an Authorization header go-sdk does
// not read as `Bearer <token>`; any other error means the token could not
// be checked.
func (a *Authenticator) Authenticate(r *http.Request) (*identity.Caller, *http.Request, error) {
	at := &attempt{}
	a.verified.ServeHTTP(discard{}, r.WithContext(context.WithValue(r.Context(), attemptKey{}, at)))
	switch {
	case at.verified != nil:
		return at.caller, at.verified, nil
	case at.err != nil:
		return nil, nil, at.err
	}
	return nil, nil, fmt.Errorf("%w: the Authorization header is not one bearer token", identity.ErrInvalidToken)
}

// Require serves next only to requests whose token verifies, answering
// others as RequireBearerToken does: MCP served alone, without the front's
// challenge, limits and throttle.
func (a *Authenticator) Require(next http.Handler) http.Handler { return a.require(next) }

func (a *Authenticator) require(next http.Handler) http.Handler {
	// Expiry is the resolver's to check, with the configured clock skew:
	// RequireBearerToken is not asked to check it again without.
	return auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

// verify is the TokenVerifier: the resolver's verdict, recorded in the
// request's attempt when Authenticate made one.
func (a *Authenticator) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	caller, err := a.resolver.Resolve(ctx, token)
	if at, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		at.caller, at.err = caller, err
	}
	switch {
	case err == nil && caller != nil:
		return &auth.TokenInfo{UserID: caller.Subject, Scopes: caller.Scopes, Extra: map[string]any{callerKey: &caller.Caller}}, nil
	case err == nil, errors.Is(err, identity.ErrInvalidToken), errors.Is(err, identity.ErrRefused):
		return nil, auth.ErrInvalidToken // its text is all a client of Require sees
	}
	return nil, errors.New("the token could not be verified")
}

// discard is where RequireBearerToken answers a refusal Authenticate
// reports instead.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// HTTPHandler serves Streamable HTTP to requests an Authenticator
// verified: a request without their TokenInfo is answered 401. It is
// stateless: each request is answered by the server of its own caller's
// catalog, and each tool call is authorized for that caller. Every refusal
// is a JSON-RPC error (answerJSONRPC).
func (s *Server) HTTPHandler() http.Handler {
	// The SDK asks for the request's server twice (stateless): it is
	// chosen once, for the request's caller, and travels in its context.
	streamable := s.answerJSONRPC(sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		srv, _ := r.Context().Value(servedKey{}).(*sdk.Server)
		return srv
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.maxBodyBytes()}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller := callerOfInfo(auth.TokenInfoFromContext(r.Context()))
		if caller == nil {
			rpcerror.New(nil, rpcerror.CodeServerError, errcode.MCPUnauthorized, "a verified bearer token is required", 0).
				Write(w, http.StatusUnauthorized)
			return
		}
		streamable.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), servedKey{}, s.forCaller(caller))))
	})
}

// servedKey carries the MCP server of an HTTP request's caller
// (forCaller) to the SDK's handler.
type servedKey struct{}

// callerOfInfo is the caller an Authenticator verified, or nil.
func callerOfInfo(info *auth.TokenInfo) *engine.Caller {
	if info == nil {
		return nil
	}
	c, _ := info.Extra[callerKey].(*engine.Caller)
	return c
}
