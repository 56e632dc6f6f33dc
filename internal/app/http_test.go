package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// serveExample opens a serving runtime of the example ontology plus extra
// config, and returns its routes (or the error building them).
func serveExample(t *testing.T, extra string) (http.Handler, error) {
	t.Helper()
	ctx := context.Background()
	url := testdb.New(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	cfg, err := ontology.Parse(append(append([]byte{}, orders.Config...),
		"identity:\n  oidc: {issuer: \"http://127.0.0.1:1\", audience: orangerail, tenant_claim: org_id, human: {claim: kind, values: [human]}}\n"+extra...))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := rt.routes(resolver)
	if f == nil {
		return nil, err
	}
	return f, err
}

// TestRoutesMountTheDesk: with a desk section the front serves the desk
// at /approvals within its own checks (a page without a session is sent to
// sign in, a cross-site POST is refused, every answer carries the CSP);
// without one there is no /approvals; a client secret variable that is
// not set refuses to serve.
func TestRoutesMountTheDesk(t *testing.T) {
	t.Parallel()
	t.Run("desk", func(t *testing.T) {
		t.Parallel()
		h, err := serveExample(t, "desk: {client_id: orangerail-desk}\n")
		if err != nil {
			t.Fatal(err)
		}
		get := httptest.NewRecorder()
		h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, web.Path, nil))
		if get.Code != http.StatusSeeOther || !strings.HasPrefix(get.Header().Get("Location"), web.Path+"/signin") ||
			get.Header().Get("Content-Security-Policy") != web.ContentSecurityPolicy {
			t.Fatalf("GET %s: %d %v", web.Path, get.Code, get.Header())
		}
		post := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, web.Path+"/00000000-0000-0000-0000-000000000000/decision", strings.NewReader("decision=approve"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		h.ServeHTTP(post, req)
		if post.Code != http.StatusForbidden || !strings.Contains(post.Body.String(), string(errcode.DeskFormRefused)) {
			t.Fatalf("a cross-site POST: %d %s", post.Code, post.Body)
		}
	})
	t.Run("no desk", func(t *testing.T) {
		t.Parallel()
		h, err := serveExample(t, "")
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.Path, nil))
		if rec.Code != http.StatusNotFound {
			t.Fatalf("GET %s without a desk: %d", web.Path, rec.Code)
		}
	})
	t.Run("secret variable unset", func(t *testing.T) {
		t.Parallel()
		_, err := serveExample(t, "desk: {client_id: orangerail-desk, client_secret_env: ORANGERAIL_TEST_DESK_SECRET_UNSET}\n")
		if errcode.Of(err) != errcode.ConfigInvalid || !strings.Contains(err.Error(), "ORANGERAIL_TEST_DESK_SECRET_UNSET") {
			t.Fatalf("routes = %v, want %s naming the variable", err, errcode.ConfigInvalid)
		}
	})
}

// TestABusyAddressIsCoded: an address another listener holds is refused
// X_LISTEN_FAILED, naming the address and saying how to move.
func TestABusyAddressIsCoded(t *testing.T) {
	held, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ln, err := Listen(t.Context(), held.Addr().String())
	if err == nil {
		ln.Close()
		t.Fatal("a busy address was bound twice")
	}
	if errcode.Of(err) != errcode.ListenFailed || !strings.Contains(err.Error(), "http.listen "+held.Addr().String()) {
		t.Fatalf("a busy address: %v", err)
	}
}
