package httpeffect_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// clientCert makes a certificate authority and a client certificate it
// signed: the authority, and the certificate with its key as one PEM.
func clientCert(t *testing.T, cn string) (*x509.Certificate, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// tlsUpstream starts an HTTPS server of handler that verifies a client
// certificate signed by clientCA — required, or only when one is given —
// and writes its own certificate to a ca_file: the upstream's private
// CA, which the system's roots would refuse.
func tlsUpstream(t *testing.T, handler http.HandlerFunc, clientCA *x509.Certificate, auth tls.ClientAuthType) (srv *httptest.Server, caFile string) {
	t.Helper()
	clients := x509.NewCertPool()
	clients.AddCert(clientCA)
	srv = httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{ClientAuth: auth, ClientCAs: clients, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

const mtlsConfig = `service: shop
upstreams:
  vault:
    base_url: %q
    ca_file: %q
    auth:
      client: {type: mtls}
actions:
  seal:
    description: d
    input: {type: object, properties: {id: {type: string}}}
    policy: {roles: [support]}
    destructive: false
    execute: {http: {upstream: vault, method: POST, path: "/seal/{id}", retry: never}}
`

// TestMutualTLS: an upstream behind a private CA that requires a client
// certificate is called with the scheme's certificate, over a server
// certificate checked against upstreams.NAME.ca_file, not the system's
// roots; without the certificate the handshake fails and nothing reaches
// the handler; a ca_file of no certificate stops the engine being made.
func TestMutualTLS(t *testing.T) {
	ca, credential := clientCert(t, "orangerail-test-client")
	var served atomic.Int32
	var peer atomic.Value
	srv, caFile := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		peer.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sealed": true}`))
	}, ca, tls.RequireAndVerifyClientCert)
	cfg, err := ontology.Parse(fmt.Appendf(nil, mtlsConfig, srv.URL, caFile))
	if err != nil {
		t.Fatal(err)
	}
	store := testdb.RuntimePool(t, testdb.New(t))
	ctx := context.Background()
	call := func() *engine.Outcome {
		t.Helper()
		e, err := engine.New(engine.Config{Ontology: cfg, Store: store, Effects: effects.Factories(), Catalog: &ontology.Catalog{},
			Key: make([]byte, engine.KeySize), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return e.Call(ctx, agent("acme"), "seal", json.RawMessage(`{"id": "s-1"}`))
	}

	t.Setenv("VAULT_CLIENT_CREDENTIAL", credential)
	out := call()
	if out.Status != engine.StatusOK || !strings.Contains(string(out.Data), `"sealed":true`) || peer.Load() != "orangerail-test-client" {
		t.Fatalf("the mutual TLS call: %s %s (peer %v)", out.Status, out.Data, peer.Load())
	}

	// Without the client certificate the server ends the handshake:
	// nothing is served, and the call fails without a doubt.
	t.Setenv("VAULT_CLIENT_CREDENTIAL", "")
	before := served.Load()
	if out := call(); out.Status == engine.StatusOK || served.Load() != before {
		t.Fatalf("without the client certificate: %s, served %d", out.Status, served.Load()-before)
	}

	// A ca_file holding no certificate stops the engine, naming the file.
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken, err := ontology.Parse(fmt.Appendf(nil, mtlsConfig, srv.URL, empty))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.New(engine.Config{Ontology: broken, Store: store, Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet}); err == nil || !strings.Contains(err.Error(), "upstreams.vault.ca_file") {
		t.Fatalf("a ca_file of no certificate: %v", err)
	}
}

// TestUnplaceableInput: an input the schema allows but the call cannot
// place — an object bound into a query — fails as
// upstream_request_unplaceable, with nothing sent, rather than as a
// failure of the upstream's.
func TestUnplaceableInput(t *testing.T) {
	t.Parallel()
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served.Add(1) }))
	t.Cleanup(srv.Close)
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: shop
upstreams:
  carrier: {base_url: %q}
actions:
  find:
    description: d
    input: {type: object, properties: {filter: {type: object}}}
    policy: {roles: [support]}
    destructive: false
    execute: {http: {upstream: carrier, method: GET, path: /labels, query: {f: ":filter"}}}
`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, testdb.New(t)), Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Call(context.Background(), agent("acme"), "find", json.RawMessage(`{"filter": {"status": "open"}}`))
	if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamUnplaceable || served.Load() != 0 {
		t.Fatalf("an object bound into a query: %s %s, %d requests served", out.Status, out.Diagnostic, served.Load())
	}
}

// TestPresentedSchemes: each call places the credentials of the schemes
// it presents and no other — every scheme by default, those its auth
// names, none for auth: [] — and a client certificate, which belongs to
// the connection, goes out only on the connections of a call that
// presents its scheme.
func TestPresentedSchemes(t *testing.T) {
	ca, credential := clientCert(t, "orangerail-test-client")
	type seen struct{ cert, key, user string }
	var mu sync.Mutex
	saw := map[string]seen{}
	// The server asks for a certificate and takes a connection without
	// one, so what each call presents can be seen.
	srv, caFile := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		s := seen{key: r.Header.Get("X-Key")}
		if len(r.TLS.PeerCertificates) > 0 {
			s.cert = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		s.user, _, _ = r.BasicAuth()
		mu.Lock()
		saw[r.URL.Path] = s
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}, ca, tls.VerifyClientCertIfGiven)
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: shop
upstreams:
  vault:
    base_url: %q
    ca_file: %q
    auth:
      client: {type: mtls}
      key: {type: api_key, in: header, name: X-Key}
      login: {type: basic}
actions:
  seal:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    destructive: false
    execute: {http: {upstream: vault, method: POST, path: /seal, retry: never}}
  peek:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: vault, method: GET, path: /peek, auth: [key]}}
  login:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: vault, method: GET, path: /login, auth: [login, client]}}
  status:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: vault, method: GET, path: /status, auth: []}}
`, srv.URL, caFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_CLIENT_CREDENTIAL", credential)
	t.Setenv("VAULT_KEY_CREDENTIAL", "key-SECRET")
	t.Setenv("VAULT_LOGIN_CREDENTIAL", "user:pass-SECRET")
	e, err := engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, testdb.New(t)), Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"seal", "peek", "login", "status"} {
		if out := e.Call(context.Background(), agent("acme"), action, json.RawMessage(`{}`)); out.Status != engine.StatusOK {
			t.Fatalf("%s: %s %v", action, out.Status, out.Err)
		}
	}
	want := map[string]seen{
		"/seal":   {cert: "orangerail-test-client", key: "key-SECRET", user: "user"},
		"/peek":   {key: "key-SECRET"},
		"/login":  {cert: "orangerail-test-client", user: "user"},
		"/status": {},
	}
	mu.Lock()
	defer mu.Unlock()
	for path, w := range want {
		if saw[path] != w {
			t.Errorf("%s presented %+v, want %+v", path, saw[path], w)
		}
	}
}

// TestTokenEndpointReachedAsItsUpstream: an oauth2_client_credentials
// token endpoint is reached with its upstream's TLS settings — its
// certificate checked against upstreams.NAME.ca_file (the test server's
// own certificate: the system's roots would refuse it), and, on a call
// that also presents an mtls scheme, with that client certificate, which
// a call presenting only the token does not send (RFC 8705's
// certificate-bound tokens).
func TestTokenEndpointReachedAsItsUpstream(t *testing.T) {
	ca, credential := clientCert(t, "orangerail-test-client")
	var mu sync.Mutex
	fetchedBy := map[string]string{} // the token's scope → the certificate its fetch presented
	called := map[string]string{}    // the path → the Authorization it carried
	srv, caFile := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/token" {
			cert := ""
			if len(r.TLS.PeerCertificates) > 0 {
				cert = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			if err := r.ParseForm(); err != nil {
				t.Error(err)
			}
			fetchedBy[r.PostForm.Get("scope")] = cert
			_, _ = fmt.Fprintf(w, `{"access_token": "tok-%d", "token_type": "Bearer", "expires_in": 3600}`, len(fetchedBy))
			return
		}
		called[r.URL.Path] = r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{}`))
	}, ca, tls.VerifyClientCertIfGiven)
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: shop
upstreams:
  vault:
    base_url: %[1]q
    ca_file: %[2]q
    auth:
      client: {type: mtls}
      bound: {type: oauth2_client_credentials, token_url: "%[1]s/token", scopes: [bound]}
      plain: {type: oauth2_client_credentials, token_url: "%[1]s/token", scopes: [plain]}
actions:
  seal:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    destructive: false
    execute: {http: {upstream: vault, method: POST, path: /seal, retry: never, auth: [bound, client]}}
  peek:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: vault, method: GET, path: /peek, auth: [plain]}}
`, srv.URL, caFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_CLIENT_CREDENTIAL", credential)
	t.Setenv("VAULT_BOUND_CREDENTIAL", "id-1:secret-1")
	t.Setenv("VAULT_PLAIN_CREDENTIAL", "id-2:secret-2")
	e, err := engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, testdb.New(t)), Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"seal", "peek"} {
		if out := e.Call(context.Background(), agent("acme"), action, json.RawMessage(`{}`)); out.Status != engine.StatusOK {
			t.Fatalf("%s: %s %s %v", action, out.Status, out.Diagnostic, out.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]string{"bound": "orangerail-test-client", "plain": ""}; !maps.Equal(fetchedBy, want) {
		t.Errorf("the token fetches presented %v, want %v", fetchedBy, want)
	}
	if !strings.HasPrefix(called["/seal"], "Bearer tok-") || !strings.HasPrefix(called["/peek"], "Bearer tok-") || called["/seal"] == called["/peek"] {
		t.Errorf("the calls carried %v, want each its own scheme's token", called)
	}
}
