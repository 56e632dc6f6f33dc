package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
)

// StdioIdentity is the caller of a stdio session served under a real
// identity, and the check that keeps its token honoured.
type StdioIdentity struct {
	// Caller is the token's caller, never stamped dev_mode.
	Caller *identity.Caller
	// Check verifies the token again, as HTTP verifies every request's.
	Check func(context.Context) error
}

// VerifyStdioToken verifies token exactly as the HTTP front does (the
// resolver of the config's identity.oidc) and returns its caller. A
// missing or refused token is X_STDIO_TOKEN_REFUSED; an issuer that cannot
// be reached is X_MCP_IDENTITY_UNAVAILABLE. The error never holds the token.
func VerifyStdioToken(ctx context.Context, cfg *ontology.Config, token string) (*StdioIdentity, error) {
	return verifyStdioToken(ctx, cfg, token, identity.ResolverOptions{})
}

// verifyStdioToken is VerifyStdioToken with the resolver's options (a test's clock).
func verifyStdioToken(ctx context.Context, cfg *ontology.Config, token string, opts identity.ResolverOptions) (*StdioIdentity, error) {
	if cfg.Identity.OIDC == nil {
		return nil, errcode.New(errcode.IdentityRequired, "--token-env needs identity.oidc in the config to verify the token", nil)
	}
	// A variable filled from a file (a secret mount, an env file) may end
	// in a newline, which no compact JWS holds: it is not the token's.
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errcode.New(errcode.StdioTokenRefused, "the token variable is empty or not set", nil)
	}
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, opts)
	if err != nil {
		return nil, errcode.New(errcode.IdentityRequired, err.Error(), nil)
	}
	verify := func(ctx context.Context) (*identity.Caller, error) {
		caller, err := resolver.Resolve(ctx, token)
		switch {
		case err == nil:
			return caller, nil
		case errors.Is(err, identity.ErrInvalidToken):
			// The reason (expired, audience, signature) is the operator's
			// to read: this process is theirs, and it never holds the token.
			return nil, errcode.New(errcode.StdioTokenRefused, err.Error(), err)
		}
		return nil, errcode.New(errcode.MCPIdentityUnavailable, fmt.Sprintf("the token could not be verified: %v", err), err)
	}
	caller, err := verify(ctx)
	if err != nil {
		return nil, err
	}
	return &StdioIdentity{Caller: caller, Check: func(ctx context.Context) error {
		_, err := verify(ctx)
		return err
	}}, nil
}

// ServeStdio serves MCP over this process's stdin and stdout to caller,
// until the client disconnects or ctx ends. check, when set, is asked
// before every request; a request it refuses is answered with its error.
func (rt *Runtime) ServeStdio(ctx context.Context, caller *engine.Caller, check func(context.Context) error) error {
	if rt.MCP == nil {
		return fmt.Errorf("app: the runtime was not opened to serve")
	}
	return rt.MCP.ServeStdio(ctx, caller, check)
}
