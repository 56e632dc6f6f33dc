package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/errcode"
)

func code(err error) errcode.Code {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestPlainHTTPOnlyOnLoopback: the token goes over plain http to a
// loopback server, and elsewhere only when the person says so.
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	for server, refused := range map[string]bool{
		"http://10.0.0.5:8080":         true,
		"http://orangerail.example":    true,
		"http://[2001:db8::1]:80":      true,
		"http://127.0.0.1:8080":        false,
		"http://localhost:8080":        false,
		"http://[::1]:8080":            false,
		"https://orangerail.example":   false,
		"https://10.0.0.5:8443/":       false,
		"http://127.0.0.2:1/":          false,
		"http://localhost.example:80/": true,
	} {
		_, err := New(server, "t", Options{})
		if got := code(err) == errcode.ServerInsecure; got != refused {
			t.Errorf("New(%q) = %v, want refused %v", server, err, refused)
		}
		if _, err := New(server, "t", Options{PlainHTTP: true}); err != nil {
			t.Errorf("New(%q) with PlainHTTP = %v", server, err)
		}
	}
	for _, server := range []string{"ftp://x", "https://user@x", "https://x?q=1", "x", "https://x/orangerail", "https://x#f"} {
		if _, err := New(server, "t", Options{PlainHTTP: true}); code(err) != errcode.Usage {
			t.Errorf("New(%q) = %v, want %s", server, err, errcode.Usage)
		}
	}
}

// recorder is a server that records the bearer tokens it was sent.
type recorder struct {
	mu     sync.Mutex
	tokens []string
	asked  int // metadata requests
}

func (r *recorder) saw(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := req.Header.Get("Authorization"); a != "" {
		r.tokens = append(r.tokens, a)
	}
	if req.URL.Path == api.MetadataPath {
		r.asked++
	}
}

func (r *recorder) seen() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...), r.asked
}

// TestRedirectIsNotFollowed: a redirect, even to the same host over plain
// http, is refused, and the token goes no further.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere := &recorder{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.saw(r) }))
	defer target.Close()
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer src.Close()
	c, err := New(src.URL, "secret", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context(), ListQuery{}); code(err) != errcode.ServerInsecure || !strings.Contains(err.Error(), target.URL) {
		t.Fatalf("List through a redirect = %v, want %s naming where it led", err, errcode.ServerInsecure)
	}
	if tokens, _ := elsewhere.seen(); len(tokens) != 0 {
		t.Fatalf("the redirect's target was sent %v", tokens)
	}
}

// TestTokenGoesOnlyToAServerOfItsIssuer: a kept token (its issuer known)
// is sent only to a server whose protected-resource metadata names that
// issuer; the metadata is asked once, without the token. A token of
// unknown issuer (set by the person) is sent unchecked.
func TestTokenGoesOnlyToAServerOfItsIssuer(t *testing.T) {
	t.Parallel()
	server := func(t *testing.T, metadata func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *recorder) {
		t.Helper()
		rec := &recorder{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.saw(r)
			if r.URL.Path == api.MetadataPath {
				metadata(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(api.List{})
		}))
		t.Cleanup(srv.Close)
		return srv, rec
	}
	// names is metadata naming the API of the server asked, and servers.
	names := func(servers ...string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "http://" + r.Host + api.Prefix, "authorization_servers": servers})
		}
	}
	jwt := func(iss string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iss":"`+iss+`","sub":"ada"}`)) + ".c2lnbmF0dXJl"
	}
	for _, tc := range []struct {
		name     string
		issuer   string
		token    string
		metadata func(w http.ResponseWriter, r *http.Request)
		sent     bool
	}{
		{"its issuer", "https://id.example", "secret", names("https://other.example", "https://id.example"), true},
		{"its issuer, a slash apart", "https://id.example/", "secret", names("https://id.example"), true},
		{"another issuer", "https://id.example", "secret", names("https://other.example"), false},
		{"a prefix of it", "https://id.example", "secret", names("https://id.example.evil"), false},
		{"no issuer named", "https://id.example", "secret", names(), false},
		{"no metadata", "https://id.example", "secret", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, false},
		{"metadata not JSON", "https://id.example", "secret", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }, false},
		{"a JWT of its issuer", "", jwt("https://id.example"), names("https://id.example"), true},
		{"a JWT of another issuer", "", jwt("https://id.example"), names("https://other.example"), false},
		{"a token of no issuer known", "", "secret", names("https://other.example"), true},
		{"its resource, spelled otherwise", "https://id.example", "secret", func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "HTTP://" + strings.ToUpper(r.Host) + api.Prefix + "/", "authorization_servers": []string{"https://id.example"}})
		}, true},
		{"no metadata now", "https://id.example", "secret", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, false},
		{"metadata of another resource", "https://id.example", "secret", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "https://elsewhere.example/api/v1", "authorization_servers": []string{"https://id.example"}})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := server(t, tc.metadata)
			c, err := New(srv.URL, tc.token, Options{Issuer: tc.issuer})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, err = c.List(t.Context(), ListQuery{})
				if tc.sent && err != nil {
					t.Fatalf("List = %v", err)
				}
				want := errcode.TokenIssuerMismatch
				switch {
				case strings.Contains(tc.name, "resource"):
					want = errcode.RequestInvalid
				case tc.name == "no metadata now":
					want = errcode.ServerUnreachable // not a verdict: asked again
				}
				if !tc.sent && (err == nil || code(err) != want) {
					t.Fatalf("List = %v, want %q", err, want)
				}
			}
			tokens, asked := rec.seen()
			if tc.sent != (len(tokens) == 2) || !tc.sent && len(tokens) != 0 {
				t.Fatalf("the server was sent %v", tokens)
			}
			want := map[bool]int{true: 1, false: 0}[tc.issuer != "" || tc.token != "secret"]
			if tc.name == "no metadata now" {
				want = 2 // a failure to answer is no verdict: asked at each request
			}
			if asked != want {
				t.Fatalf("the metadata was asked %d times, want %d", asked, want)
			}
			if !tc.sent && !strings.Contains(err.Error(), "https://id.example") && !strings.Contains(tc.name, "resource") && tc.name != "no metadata now" {
				t.Fatalf("the refusal does not name the token's issuer: %v", err)
			}
		})
	}
}

// TestIssuerCheckIsAskedAgainAfterAFailure: a request that could not ask
// the server (its context ended) leaves the question open; the next asks
// it, and a redirect of the metadata is refused like any other.
func TestIssuerCheckIsAskedAgainAfterAFailure(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.saw(r)
		if r.URL.Path == api.MetadataPath {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "http://" + r.Host + api.Prefix, "authorization_servers": []string{"https://id.example"}})
			return
		}
		_ = json.NewEncoder(w).Encode(api.List{})
	}))
	defer srv.Close()
	c, err := New(srv.URL, "secret", Options{Issuer: "https://id.example"})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.List(ended, ListQuery{}); err == nil || code(err) != "" {
		t.Fatalf("List with an ended context = %v, want an uncoded failure", err)
	}
	if _, err := c.List(t.Context(), ListQuery{}); err != nil {
		t.Fatalf("List after = %v", err)
	}
	if tokens, asked := rec.seen(); len(tokens) != 1 || asked != 1 {
		t.Fatalf("sent %d tokens, asked the metadata %d times", len(tokens), asked)
	}

	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path, http.StatusFound)
	}))
	defer moved.Close()
	c, err = New(moved.URL, "secret", Options{Issuer: "https://id.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context(), ListQuery{}); code(err) != errcode.ServerInsecure {
		t.Fatalf("List where the metadata redirects = %v, want %s", err, errcode.ServerInsecure)
	}
}

// TestAnswerNamesItsCorrelationID: an error the API answers with a
// correlation id (a contained panic) says it, for the operator's log.
func TestAnswerNamesItsCorrelationID(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"code":"X_INTERNAL_ERROR","message":"an unexpected internal error","fix":"x","correlation_id":"c0ffee"}}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "secret", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context(), ListQuery{}); code(err) != errcode.InternalError || !strings.Contains(err.Error(), "correlation id c0ffee") {
		t.Fatalf("List = %v", err)
	}
}

// TestAServerThatIsNoAPIIsCoded: a server that does not answer, or
// answers as no approvals API does (a proxy's error page), is
// X_SERVER_UNREACHABLE, not words with no code.
func TestAServerThatIsNoAPIIsCoded(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unsupported method", http.StatusNotImplemented)
	}))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	defer other.Close()
	for _, server := range []string{other.URL, gone.URL} {
		c, err := New(server, "secret", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.List(t.Context(), ListQuery{}); code(err) != errcode.ServerUnreachable {
			t.Errorf("List of %s = %v, want %s", server, err, errcode.ServerUnreachable)
		}
	}
}

// TestADetailNoAPIAnswersIsCoded: an approval's detail naming a decider
// without the decision's time, or a time without a decider, is none the
// API answers (its row holds both or neither): X_SERVER_UNREACHABLE, where
// the command printing it failed on the missing time.
func TestADetailNoAPIAnswersIsCoded(t *testing.T) {
	t.Parallel()
	for body, ok := range map[string]bool{
		`{"id":"2b1f9ad8-2f23-4b4e-9d56-2d5b1b0e4f10","status":"rejected","decided_by":"x","decided_at":null}`:                   false,
		`{"id":"2b1f9ad8-2f23-4b4e-9d56-2d5b1b0e4f10","status":"rejected","decided_at":"2026-01-01T00:00:00Z"}`:                  false,
		`{"id":"2b1f9ad8-2f23-4b4e-9d56-2d5b1b0e4f10","status":"rejected","decided_by":"x","decided_at":"2026-01-01T00:00:00Z"}`: true,
		`{"id":"2b1f9ad8-2f23-4b4e-9d56-2d5b1b0e4f10","status":"pending"}`:                                                       true,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		c, err := New(srv.URL, "secret", Options{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Show(t.Context(), "2b1f9ad8-2f23-4b4e-9d56-2d5b1b0e4f10")
		if ok && (err != nil || d == nil) || !ok && code(err) != errcode.ServerUnreachable {
			t.Errorf("Show of %s = %v, %v", body, d, err)
		}
		srv.Close()
	}
}
