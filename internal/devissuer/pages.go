package devissuer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
)

//go:embed web
var webFS embed.FS

// pages are the issuer's HTML pages. They carry no script at all, so the
// Content-Security-Policy can forbid every script.
var pages = template.Must(template.ParseFS(webFS, "web/*.html"))

// page is what every template reads.
type page struct {
	Title   string
	Error   string // shown above the form when the last attempt failed
	Message string // the outcome of a finished page
	// Login page.
	Request, CSRF, Client, RedirectOrigin, Username string
	// Device page.
	UserCode string
}

// browserCookie ties a form to the browser that loaded it: the form's CSRF
// token is a MAC over this cookie's value, so a token copied to another
// browser (or forged by another site) does not verify. SameSite=Strict keeps
// it off cross-site requests too.
const browserCookie = "devissuer_browser"

// browserID returns the browser's id, setting the cookie on first sight.
func browserID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(browserCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	id := randomToken()
	// Secure only over TLS: the issuer serves plain HTTP on loopback, where
	// a Secure cookie would not come back from every client (Go's cookie jar).
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: Secure is set whenever the request came over TLS
		Name: browserCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return id
}

// csrfToken is the form token for purpose (one login request, or the
// device page) in the browser with id browser.
func (i *Issuer) csrfToken(purpose, browser string) string {
	mac := hmac.New(sha256.New, i.csrfKey)
	mac.Write([]byte(purpose))
	mac.Write([]byte{0})
	mac.Write([]byte(browser))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkCSRF reports whether the posted form token belongs to purpose and to
// the browser that posts it.
func (i *Issuer) checkCSRF(r *http.Request, purpose string) bool {
	c, err := r.Cookie(browserCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(i.csrfToken(purpose, c.Value)))
}

// render writes a page with headers that keep it from running script,
// being framed, cached or leaking its URL. formTarget is an origin the
// page's form may end up at besides this one: Chrome applies form-action to
// the redirects that follow a submission, so the login page must allow the
// client's redirect URI.
func render(w http.ResponseWriter, status int, name, formTarget string, p page) {
	formAction := "'self'"
	if formTarget != "" {
		formAction += " " + formTarget
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action "+formAction+
		"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, p); err != nil {
		// The status is out; all that is left is to say so in the host log.
		slog.Error("devissuer: render page", "page", name, "error", err)
	}
}

func serveStylesheet(w http.ResponseWriter, _ *http.Request) {
	css, err := webFS.ReadFile("web/devissuer.css")
	if err != nil {
		http.Error(w, "no stylesheet", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(css)
}

// randomToken is 32 random bytes, base64url: codes, ids, cookies.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// cspSource is origin as a CSP source expression, or "" when it could
// break out of the header (AddClient already refuses such URIs; this is
// the second lock).
func cspSource(origin string) string {
	if strings.ContainsAny(origin, " ;,'\"\t\r\n") {
		return ""
	}
	return origin
}
