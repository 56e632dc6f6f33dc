// Command authproxy is test support for e2e/conformance: a reverse proxy
// in front of the running demo that adds `Authorization: Bearer <token>`,
// a development token the demo's own issuer minted and wrote to
// demo.json, to each request that carries none. The conformance suite and
// the Inspector CLI speak MCP without OAuth; the server keeps every check
// it has (this proxy is never part of the product, and a token it adds is
// checked like any other). Host and Origin pass through unchanged, so the
// server's DNS-rebinding protection judges exactly what the client sent.
//
// It prints the proxied MCP URL as its first line on stdout, then serves
// until interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// facts is the part of the demo's demo.json this proxy reads.
type facts struct {
	Tokens map[string]map[string]string `json:"tokens"`
	MCPURL *string                      `json:"mcp_url"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "authproxy:", err)
		os.Exit(1)
	}
}

func run() error {
	factsPath := flag.String("facts", "", "the running demo's demo.json")
	role := flag.String("role", "agent", "whose development token: agent, approver or auditor")
	tenant := flag.String("tenant", "acme", "the token's tenant")
	listen := flag.String("listen", "127.0.0.1:0", "where the proxy listens (loopback)")
	flag.Parse()
	if *factsPath == "" {
		return errors.New("-facts is required")
	}
	b, err := os.ReadFile(*factsPath)
	if err != nil {
		return err
	}
	var f facts
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: %w", *factsPath, err)
	}
	if f.MCPURL == nil {
		return fmt.Errorf("%s has no mcp_url: is the demo serving?", *factsPath)
	}
	token := f.Tokens[*role][*tenant]
	if token == "" {
		return fmt.Errorf("%s has no %s token for tenant %s", *factsPath, *role, *tenant)
	}
	target, err := url.Parse(*f.MCPURL)
	if err != nil {
		return err
	}

	proxy := newProxy(target, token)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: logged(proxy), ReadHeaderTimeout: 10 * time.Second}
	// One request per client connection. In two clean-clone runs the
	// suite's tools/list failed "terminated": its client (Node's fetch,
	// undici) closed the connection while this proxy was copying the
	// server's answer to it (the proxy's read of the answer was cut by the
	// client's going). The likely cause is undici's reuse of a connection
	// whose last response body was never read — the SDK's probe of GET
	// /mcp, answered 405 — a body it may cancel later by closing that
	// socket. A connection per request keeps the client's connection reuse
	// out of what the suite judges; what reaches the server is unchanged,
	// and the log below says, of each request, whether the client went.
	srv.SetKeepAlivesEnabled(false)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("http://%s%s\n", ln.Addr(), target.Path)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// logged logs each request's start and end to stderr (the run keeps it
// as bin/conformance/proxy-ROLE.err): the client's address, and whether
// the client went away before the answer was written.
func logged(next http.Handler) http.Handler {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		logger.Info("start", "method", r.Method, "path", r.URL.Path, "client", r.RemoteAddr)
		defer func() {
			logger.Info("end", "method", r.Method, "path", r.URL.Path, "client", r.RemoteAddr,
				"after", time.Since(start), "client_gone", r.Context().Err() != nil)
		}()
		next.ServeHTTP(w, r)
	})
}

// newProxy forwards every request to target's origin, with token as its
// bearer token when the request carries no Authorization of its own.
func newProxy(target *url.URL, token string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			// What the client sent, not the upstream's address: the
			// server's Host and Origin checks see the client's request.
			r.Out.Host = r.In.Host
			if r.Out.Header.Get("Authorization") == "" {
				r.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		FlushInterval: -1, // SSE streams reach the client as they are written
	}
}
