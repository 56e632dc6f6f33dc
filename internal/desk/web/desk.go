// Package web is the approvers' desk at /approvals: a server-rendered site
// where a person signs in at the team's OIDC provider (authorization code
// with PKCE), sees the tenant's pending approvals update as agents stage
// them, reviews one — the verbatim input, the target now, the effect and
// rollback — and approves or rejects it, and reads the tenant's audit log.
//
// Sessions live in Postgres (orangerail.desk_sessions), keyed by a hash of
// the id the cookie carries, so any replica serves any person and signing
// out ends the session everywhere. Every state-changing request is a POST
// that must pass http.CrossOriginProtection and carry the session's form
// token. Pages carry no inline script: the Content-Security-Policy allows
// only this package's embedded stylesheet and script.
package web

import (
	"cmp"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
)

// Path is where the desk is mounted; every route of it is below.
const Path = "/approvals"

// Defaults of [Config].
const (
	SessionTTLDefault   = 8 * time.Hour
	PollIntervalDefault = 2 * time.Second
)

// ContentSecurityPolicy is every desk page's policy: nothing but this
// origin's stylesheet, script and images, no inline script or style, no
// framing, forms posted only here.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config configures the desk.
type Config struct {
	// Ontology holds identity.oidc, desk, http.public_url and approvals.
	// Its Desk must be set.
	Ontology *ontology.Config
	// ClientSecret is the desk's client secret (read from
	// desk.client_secret_env by the caller); empty for a public client.
	ClientSecret string
	// Engine lists, shows and decides approvals.
	Engine *engine.Engine
	// Store is orangerail's database, acting as orangerail_runtime: the
	// sessions and the audit log.
	Store *pgxpool.Pool
	// Resolver verifies the access token the sign-in returns and maps its
	// claims to the person, as it does for bearer tokens.
	Resolver *identity.Resolver
	// HTTPClient reaches the issuer (discovery, keys, token endpoint).
	// Defaults to http.DefaultClient.
	HTTPClient *http.Client
	// SessionTTL bounds a session; a session never outlives the access
	// token it began with. Defaults to SessionTTLDefault.
	SessionTTL time.Duration
	// PollInterval is how often a live list re-reads the pending
	// approvals. Defaults to PollIntervalDefault.
	PollInterval time.Duration
	// Logger receives the host log. Defaults to slog.Default().
	Logger *slog.Logger
}

// Desk serves the approvers' desk.
type Desk struct {
	c        Config
	log      *slog.Logger
	base     string // the public URL, without a trailing slash
	secure   bool   // cookies are Secure and __Host- prefixed
	oidc     *provider
	pages    *template.Template
	mux      *http.ServeMux
	crossing *http.CrossOriginProtection
	streams  streamCount
	// bill spends a person's allowance of writes on a decision posted
	// (BillDecisions); nil bills nothing.
	bill func(http.ResponseWriter, *http.Request, *engine.Caller) bool
}

// BillDecisions has every decision posted at the desk spend its person's
// allowance through bill, which answers a refused one itself and reports
// false: a signed-in person decides at the desk no faster than through the
// approvals API, whose decisions spend the same allowance. Called before
// the desk serves.
func (d *Desk) BillDecisions(bill func(http.ResponseWriter, *http.Request, *engine.Caller) bool) {
	d.bill = bill
}

//go:embed templates assets
var webFS embed.FS

// New returns the desk. It contacts no one: the issuer is discovered at
// the first sign-in.
func New(c Config) (*Desk, error) {
	o := c.Ontology
	if o == nil || o.Desk == nil || o.Identity.OIDC == nil || c.Engine == nil || c.Store == nil || c.Resolver == nil {
		return nil, errors.New("desk: the config needs desk and identity.oidc, and an engine, a store and a resolver")
	}
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	// Bounded: discovery holds the provider's lock, and go-oidc fetches the
	// issuer's keys with this client under a context that is never
	// cancelled, so an issuer that never answers must not hang sign-ins.
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	d := &Desk{c: c, log: cmp.Or(c.Logger, slog.Default()), base: strings.TrimSuffix(o.HTTP.PublicURL, "/")}
	u, err := url.Parse(d.base)
	if err != nil {
		return nil, err
	}
	// Outside loopback the desk is reached over https, and its cookies say
	// so: Secure, and __Host- so no subdomain can plant or shadow them.
	d.secure = u.Scheme == "https"
	d.oidc = newProvider(c, d.base+Path+"/callback")
	d.pages, err = template.New("").Funcs(funcs()).ParseFS(webFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	d.crossing = http.NewCrossOriginProtection()
	// Behind a proxy that rewrites Host, a browser without Sec-Fetch-Site
	// is judged by its Origin: the desk's public origin is its own.
	if err := d.crossing.AddTrustedOrigin(d.base); err != nil {
		return nil, err
	}
	d.crossing.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.refuse(w, r, http.StatusForbidden, formRefusedCode, "This form came from another site; it was not submitted.")
	}))
	assets, err := fs.Sub(webFS, "assets")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix(Path+"/assets/", http.FileServerFS(assets))
	routes := []struct {
		method, path string
		h            http.Handler
	}{
		{http.MethodGet, "/assets/{file}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Files alone, each refused as a page when missing: the
			// directory is no page, and the file server's 404 no refusal.
			if info, err := fs.Stat(assets, r.PathValue("file")); err != nil || !info.Mode().IsRegular() {
				d.noPage(w, r)
				return
			}
			files.ServeHTTP(w, r)
		})},
		{http.MethodGet, "/signin", http.HandlerFunc(d.signIn)},
		{http.MethodGet, "/callback", http.HandlerFunc(d.callback)},
		{http.MethodPost, "/signout", d.withSession(d.signOut)},
		{http.MethodGet, "", d.withSession(d.list)},
		{http.MethodGet, "/{$}", d.withSession(d.list)},
		{http.MethodGet, "/events", d.withSession(d.events)},
		{http.MethodGet, "/audit", d.withSession(d.audit)},
		{http.MethodGet, "/{id}", d.withSession(d.detail)},
		{http.MethodPost, "/{id}/decision", d.withSession(d.decide)},
	}
	m := http.NewServeMux()
	registered := map[string]bool{}
	for _, rt := range routes {
		m.Handle(rt.method+" "+Path+rt.path, rt.h)
		registered[rt.method+" "+rt.path] = true
	}
	wrongMethod := func(w http.ResponseWriter, r *http.Request, allowed string) {
		w.Header().Set("Allow", allowed)
		d.refuse(w, r, http.StatusMethodNotAllowed, errcode.DeskPageUnknown, "This page takes "+allowed+", not "+r.Method+".")
	}
	// A page of a fixed path asked with the other method is refused here:
	// left to the mux, GET /approvals/signout would be taken by /{id} for
	// an approval's id, and not found.
	companions := map[string]bool{}
	for _, rt := range routes {
		otherMethod := map[string]string{http.MethodGet: http.MethodPost, http.MethodPost: http.MethodGet}[rt.method]
		if strings.Contains(rt.path, "{") || registered[otherMethod+" "+rt.path] {
			continue
		}
		pattern, allowed := otherMethod+" "+Path+rt.path, rt.method
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { wrongMethod(w, r, allowed) })
		companions[pattern] = true
	}
	// Any other path or method under the desk is refused as the desk
	// refuses, on its page with a code, not the mux's plain text; a path
	// of a page that takes another method says which (Allow).
	const other = Path + "/"
	m.HandleFunc(other, func(w http.ResponseWriter, r *http.Request) {
		for _, allowed := range []string{http.MethodGet, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = allowed
			if _, pattern := m.Handler(probe); allowed != r.Method && pattern != other && !companions[pattern] {
				wrongMethod(w, r, allowed)
				return
			}
		}
		d.noPage(w, r)
	})
	d.mux = m
	return d, nil
}

// noPage refuses a request for a page the desk does not have.
func (d *Desk) noPage(w http.ResponseWriter, r *http.Request) {
	d.refuse(w, r, http.StatusNotFound, errcode.DeskPageUnknown, "The desk has no such page.")
}

// ServeHTTP implements http.Handler: every answer carries the security
// headers, and a POST from another site is refused before any handler.
func (d *Desk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.setHeaders(w)
	if front.Unclean(r) {
		// Served as written, never redirected to a cleaned path, which
		// names another page (a form posted to it again).
		d.noPage(w, r)
		return
	}
	d.crossing.Handler(d.mux).ServeHTTP(w, r)
}

// setHeaders sets the security headers every answer of the desk carries.
func (d *Desk) setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if d.secure {
		// Reached over https, the desk asks to be reached so from now on:
		// a later http link or a downgrading network cannot strip it.
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
}
