package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
)

// Listen binds the HTTP address; a busy one says how to move.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errcode.New(errcode.ListenFailed, fmt.Sprintf("http.listen %s: %v", addr, err), err)
	}
	return ln, nil
}

// ServeHTTP serves the HTTP front on ln, or when ln is nil on the config's
// http.listen, until ctx ends, then shuts down gracefully. The runtime
// must have been opened with Settings.Serve and a config naming
// identity.oidc.
func (rt *Runtime) ServeHTTP(ctx context.Context, ln net.Listener) error {
	cfg := rt.Config
	if rt.MCP == nil {
		return fmt.Errorf("app: the runtime was not opened to serve")
	}
	if cfg.Identity.OIDC == nil {
		return errcode.New(errcode.IdentityRequired, "serving HTTP needs identity.oidc in the config", nil)
	}
	admission, err := identity.AdmissionOf(cfg.Identity)
	if err != nil {
		return errcode.New(errcode.ConfigInvalid, err.Error(), nil)
	}
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{Admission: admission})
	if err != nil {
		return errcode.New(errcode.IdentityRequired, err.Error(), nil)
	}
	handler, err := rt.routes(resolver)
	if err != nil {
		return err
	}
	if err := resolver.Ready(ctx); err != nil {
		rt.log.Warn("OIDC discovery failed; /readyz reports not ready until it succeeds", "error", err)
	}
	if ln == nil {
		if ln, err = Listen(ctx, cfg.HTTP.Listen); err != nil {
			return err
		}
	}
	// A body is at most http.max_body_bytes and an answer takes at most a
	// query's timeout: these bound what a slow or stalled client can hold.
	srv := &http.Server{Handler: rt.tracing.Handler(handler, probe), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	rt.log.Info("serving MCP over Streamable HTTP", "service", cfg.Service, "address", ln.Addr().String(), "path", MCPPath,
		"public_url", cfg.HTTP.PublicURL, "preset", string(cfg.Preset))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		drain := DrainTimeout(cfg.Limits)
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close()
			return errcode.New(errcode.DrainIncomplete, fmt.Sprintf("calls were still in flight %s after the stop: an execution among them may be left outcome_unknown", drain), err)
		}
		return nil
	}
}

// drainGrace is what a drain allows beyond the execution bound: the
// answer's write.
const drainGrace = 5 * time.Second

// DrainTimeout is how long serve waits, once told to stop, for the calls
// in flight: an execution records its end within the execution bound of
// its start (its effect's deadline, and its records'), so a call taken
// before the stop is answered, and its end recorded, before the runtime
// closes the pools under it. Stopped sooner, an effect that ran would be
// left outcome_unknown, its end never written. A deployment's grace period
// must outlast it (deploy/kubernetes: terminationGracePeriodSeconds).
func DrainTimeout(limits ontology.Limits) time.Duration {
	return engine.ExecutionBound(limits) + drainGrace
}

// probe reports whether r is a health or readiness probe, which is not
// traced.
func probe(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}

// MCPPath is where MCP is served over HTTP.
const MCPPath = "/mcp"

// routes builds the HTTP front and mounts every route on it, each with its
// policy. A route for a new surface (the approvers' desk, metrics) mounts
// here.
func (rt *Runtime) routes(resolver *identity.Resolver) (*front.Front, error) {
	cfg := rt.Config
	var limiter front.Limiter = front.NewMemoryLimiter()
	if r := cfg.HTTP.RateLimits; r.Store == ontology.RateLimitPostgres {
		// Counted here, flushed in batches: a request is not a write
		// (README, "Rate limits across replicas"). Runtime.Close flushes
		// the rest.
		if rt.limits == nil {
			rt.limits = front.NewBatchLimiter(rt.Engine.Store(), front.BatchOptions{Share: r.Share,
				FlushInterval: time.Duration(r.FlushInterval), Logger: rt.log})
		}
		limiter = rt.limits
	}
	// One verification per request: the front's, through go-sdk's
	// RequireBearerToken, whose TokenInfo the MCP handler authorizes on.
	f := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(resolver), Limiter: limiter, Logger: rt.log, Hooks: rt.Hooks})
	f.Mount(MCPPath, rt.MCP.HTTPHandler(), front.Policy{
		Auth: front.AuthBearer, Resource: MCPPath, CheckOrigin: true,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, OneMessage: true,
		Rate: func(r *http.Request, body []byte) front.Class {
			// The caller the front verified: a tool it does not see is
			// billed as one that does not exist.
			var caller *engine.Caller
			if c := front.CallerFrom(r.Context()); c != nil {
				caller = &c.Caller
			}
			return front.ToolCalls(func(tool string, arguments map[string]any) front.Class {
				if rt.MCP.ReadOnlyCall(caller, tool, arguments) {
					return front.ClassRead
				}
				return front.ClassWrite
			})(r, body)
		},
	})
	metadata := f.Metadata(MCPPath)
	f.MountMetadata(front.MetadataPath(MCPPath), metadata)
	f.MountMetadata(front.MetadataPath(""), metadata)
	api.New(rt.Engine, rt.log).Mount(f)
	f.Mount("GET /healthz", front.Healthz(), front.Policy{})
	f.Mount("GET /readyz", f.Readyz(func(ctx context.Context) error {
		if err := rt.Ready(ctx); err != nil {
			return err
		}
		return resolver.Ready(ctx)
	}), front.Policy{})
	if cfg.Desk != nil {
		desk, err := rt.desk(resolver)
		if err != nil {
			return nil, err
		}
		// The desk authenticates by its own session cookie, not a bearer
		// token, and refuses cross-site forms itself
		// (http.CrossOriginProtection and a per-session form token): a
		// browser's same-origin POST carries an Origin that
		// http.allowed_origins, the list of MCP's browser clients, need not
		// name.
		MountDesk(f, desk)
	}
	return f, nil
}

// MountDesk mounts the desk on the front, under its policy: its own
// session cookie, not a bearer token; bodies bounded; the front's
// refusals answered as the desk's pages.
func MountDesk(f *front.Front, desk *web.Desk) {
	policy := front.Policy{Auth: front.AuthNone, MaxBodyBytes: DeskMaxBodyBytes, Refuse: desk.Refuse}
	// A decision spends the person's writes, as one through the approvals
	// API does (its POST bills front.ClassWrite to the same caller).
	desk.BillDecisions(func(w http.ResponseWriter, r *http.Request, person *engine.Caller) bool {
		return f.Bill(w, r, &identity.Caller{Caller: *person}, front.ClassWrite)
	})
	f.Mount(web.Path, desk, policy)
	f.Mount(web.Path+"/", desk, policy)
}

// DeskMaxBodyBytes caps a request to the desk: its forms are a decision
// and a note.
const DeskMaxBodyBytes = 64 << 10

// desk builds the approvers' desk from the config's desk section.
func (rt *Runtime) desk(resolver *identity.Resolver) (*web.Desk, error) {
	env := deskSecretEnv(rt.Config)
	if p := unsetVariable("desk.client_secret_env", env); p != nil {
		return nil, errcode.New(errcode.ConfigInvalid, p.String(), nil)
	}
	secret := ""
	if env != "" {
		secret = os.Getenv(env)
	}
	return web.New(web.Config{Ontology: rt.Config, ClientSecret: secret, Engine: rt.Engine, Store: rt.Store,
		Resolver: resolver, Logger: rt.log})
}
