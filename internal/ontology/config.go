// Package ontology owns orangerail's declaration: the one YAML file naming
// the objects an agent may read, the links between them and the actions it
// may ask to take. Load refuses a file with any problem, and names every
// problem by its field path.
package ontology

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/yamldoc"
)

// schemaJSON is the JSON Schema of the config file. Load checks every file
// against it before anything else, so the schema and the loader cannot
// disagree about a file's shape.
//
//go:embed config.schema.json
var schemaJSON []byte

// Schema returns the JSON Schema of the config file, for editors; a copy,
// so no caller can change what Load checks against.
func Schema() []byte { return bytes.Clone(schemaJSON) }

// Defaults of optional settings.
const (
	PresetDefault      = PresetApprovalForWrites
	HostPromptDefault  = HostPromptOff
	ApprovalTTLDefault = 24 * time.Hour
	// ApprovalTTLMin is the shortest approvals.ttl: an approval must stay
	// open for a person to be told of it and decide, and a ttl in
	// milliseconds (1ms for 1m) is a slip. Not longer: a lapse is tested
	// in seconds, by the database's clock.
	ApprovalTTLMin = time.Second
	// WebhookRetentionMin bounds webhook_retention: the worker prunes
	// hourly, and a message deleted sooner than that after it finished
	// could not be listed or redelivered by the person told it failed.
	WebhookRetentionMin = time.Hour
	// ClockSkewMax bounds identity.oidc.clock_skew: RFC 7519 asks a
	// leeway of no more than a few minutes, and an hour of it takes a
	// token for an hour after it expired.
	ClockSkewMax         = 5 * time.Minute
	ApproverRoleDefault  = "approver"
	AuditorRoleDefault   = "auditor"
	ListMaxLimitDefault  = 100
	ReadAccessDefault    = ReadAuthenticated
	configSchemaLocation = "https://orangerail.dev/schema/config.json"
)

// Preset chooses how actions are exposed.
type Preset string

// The presets.
const (
	PresetApprovalForWrites Preset = "approval-for-writes"
	PresetSandbox           Preset = "sandbox"
	PresetReadonly          Preset = "readonly"
)

// HostPrompt chooses which action tools ask the MCP host for its own
// confirmation prompt.
type HostPrompt string

// The host prompt settings.
const (
	HostPromptOff               HostPrompt = "off"
	HostPromptUngovernedActions HostPrompt = "ungoverned-actions"
	HostPromptAllActions        HostPrompt = "all-actions"
)

// Config is one orangerail deployment's declaration.
type Config struct {
	Service            string             `yaml:"service"`
	Datasource         Datasource         `yaml:"datasource"`
	Identity           Identity           `yaml:"identity"`
	HTTP               HTTP               `yaml:"http"`
	SQLQuery           SQLQuery           `yaml:"sql_query"`
	Preset             Preset             `yaml:"preset"`
	HostApprovalPrompt HostPrompt         `yaml:"host_approval_prompt"`
	Approvals          Approvals          `yaml:"approvals"`
	Audit              Audit              `yaml:"audit"`
	Metrics            Metrics            `yaml:"metrics"`
	Tracing            Tracing            `yaml:"tracing"`
	Desk               *Desk              `yaml:"desk"`
	Limits             Limits             `yaml:"limits"`
	Objects            map[string]*Object `yaml:"objects"`
	Links              map[string]*Link   `yaml:"links"`
	Actions            map[string]*Action `yaml:"actions"`
	// Scopes, when set, maps each scope a token may carry to the tools it
	// grants, and must grant every tool exactly once: a scope is a
	// capability of the caller's connection, checked before the tool's
	// input is read. Without it, an action's policy.scope is its tool's.
	Scopes map[string][]string `yaml:"scopes"`
	// toolScopes is the scope granting each tool, by name, when Scopes is
	// set: made once, at load.
	toolScopes map[string]string
	// Webhooks are the endpoints told of approval events. Defaults to none.
	Webhooks []Webhook `yaml:"webhooks"`
	// WebhookRetention is how long a finished webhook message (delivered,
	// or failed) is kept after its last attempt, for `webhooks list` and
	// `webhooks redeliver`, before the worker deletes it. Nil: 30 days
	// (webhooks.RetentionDefault). At least WebhookRetentionMin.
	WebhookRetention *Days `yaml:"webhook_retention"`
	// Prompts are the message templates the MCP server offers, by name.
	// Defaults to none (and then no prompts capability is declared).
	Prompts map[string]*Prompt `yaml:"prompts"`

	// Upstreams are the HTTP APIs actions call (execute: {http: …}), by
	// name (upstream.go).
	Upstreams map[string]*Upstream `yaml:"upstreams"`
	// Environment selects each upstream's base_urls entry. Empty: only
	// upstreams with one base_url serve.
	Environment string `yaml:"environment"`
	// The meta surface (surface.go).
	// Surface chooses each caller's surface, flat or meta. Defaults to
	// flat for every caller.
	Surface SurfaceConfig `yaml:"surface"`
	// Groups are the meta surface's resources, by name: the tools a meta
	// caller reaches through manage_resource.
	Groups map[string]*Group `yaml:"groups"`
	// toolGroups is the group holding each grouped tool, made at load.
	toolGroups map[string]string
	// End of the meta surface.

	// unserved are the actions withdrawn at load because their
	// environments do not include the config's (environments.go).
	unserved map[string]*Action
}

// Datasource names where the team's data lives.
type Datasource struct {
	// URLEnv names the environment variable holding the datasource URL.
	// Empty: the service's own database.
	URLEnv string `yaml:"url_env"`
}

// Identity configures how callers are recognized.
type Identity struct {
	OIDC *OIDC `yaml:"oidc"`
	// RefuseBrowserOrigins refuses every request carrying an Origin
	// header, whatever its token: a browser sent it, and this deployment
	// serves no browser page that should call it.
	RefuseBrowserOrigins bool `yaml:"refuse_browser_origins"`
	// AllowedNetworks, when set, binds tokens to networks: a valid token
	// from an address outside every one of these CIDRs is refused. The
	// address is the one the front computes (http.trusted_proxy_hops).
	AllowedNetworks []string `yaml:"allowed_networks"`
}

// OIDC configures bearer-token verification.
type OIDC struct {
	// Issuer is the OIDC issuer URL: https, or http on loopback. When
	// IssuerEnv is set, the loaded config holds the URL read from it.
	Issuer string `yaml:"issuer"`
	// IssuerEnv names the environment variable holding the issuer URL,
	// read when the config is loaded, so one config file serves every
	// environment. Exactly one of Issuer and IssuerEnv is set in the file.
	IssuerEnv string `yaml:"issuer_env"`
	Audience  string `yaml:"audience"`
	// TenantClaim names the claim holding the caller's tenant; a token
	// without it is refused.
	TenantClaim string `yaml:"tenant_claim"`
	// RolesClaim names the roles claim (array or space-separated string).
	// Defaults to "roles".
	RolesClaim string `yaml:"roles_claim"`
	// ScopesClaim names the scopes claim ("scope" string or "scp" array).
	// Defaults to "scope".
	ScopesClaim string `yaml:"scopes_claim"`
	// Human decides which callers are people; every other caller is an
	// agent. Absent: every caller is an agent.
	Human *HumanRule `yaml:"human"`
	// ClockSkew tolerates clocks apart on exp and nbf: at most
	// ClockSkewMax. Defaults to 30s.
	ClockSkew Duration `yaml:"clock_skew"`
	// AuthorizationServers are advertised in the protected-resource
	// metadata: each held to the issuer's rule (CheckIssuerURL). Defaults
	// to the issuer.
	AuthorizationServers []string `yaml:"authorization_servers"`
}

// Desk configures the approvers' web desk at /approvals, an OAuth client
// of the identity.oidc issuer. Absent: the desk is off.
type Desk struct {
	// ClientID is the desk's client id at the issuer.
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv names the environment variable holding the client's
	// secret. Empty: a public client, which the issuer authenticates by
	// PKCE alone.
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// HumanRule marks a caller as a person when its Claim holds one of Values.
type HumanRule struct {
	Claim  string   `yaml:"claim"`
	Values []string `yaml:"values"`
}

// CheckIssuer refuses an issuer URL that is not https, unless its host is a
// loopback address.
func CheckIssuer(issuer string) error {
	return CheckIssuerURL("the issuer", issuer)
}

// CheckIssuerURL holds raw, a URL the issuer is reached at (itself, its
// keys', a redirect on the way), to the issuer's rule: https, or http on
// a loopback host, and no user in it: the issuer and the authorization
// servers are published to anyone in the protected-resource metadata, and
// the issuer is named in each discovery failure the host log records.
// what names it in the error.
func CheckIssuerURL(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %s is not a URL", what, ShownURL(raw))
	}
	if u.User != nil {
		return fmt.Errorf("%s %s holds a user: it is published and logged, so credentials never go in it", what, ShownURL(raw))
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" && LoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%s %s must be https (%w)", what, ShownURL(raw), ErrIssuerInsecure)
}

// SameIssuer reports whether a and b spell the same issuer: an issuer
// re-spelled in the config (a trailing slash added or removed, its scheme
// or host in another case, its default port written out) still vouches for
// the same people, so an identity formed under one spelling is the one
// formed under the other — else, while approvals were pending, their
// requester looked like another person to four-eyes. Strings that are no
// URL are compared as they are.
func SameIssuer(a, b string) bool {
	return a == b || IssuerKey(a) == IssuerKey(b)
}

// IssuerKey is an issuer as SameIssuer compares it (RFC 3986 6.2.2 and
// 6.2.3): the scheme and host in lower case, no default port, no trailing
// slash. What is keyed on the caller's issuer (an idempotency key) is
// keyed on this, so that every spelling of one issuer finds the same key.
func IssuerKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return raw
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); (scheme == "https" && p == "443") || (scheme == "http" && p == "80") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	key := scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" || u.ForceQuery {
		key += "?" + u.RawQuery
	}
	return key
}

// ShownURL is raw as a refusal quotes it: its scheme, host and path, and
// never its user and password, its query or its fragment, any of which
// can hold a credential (https://user:password@…, ?api_key=…) that the
// refusal — printed by config check, written to the host log as serve
// starts — would copy out of the file it was kept in. A string with no
// host to name is quoted only when it holds no "@", "?" or "#", past
// which a credential may be. Its path is shown, as the refusals name it:
// a webhook's URL, whose path is commonly its secret, is shown by
// ShownWebhookURL, without one.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if strings.ContainsAny(raw, "@?#") {
			return "(a URL that does not parse as scheme://host/path)"
		}
		return strconv.Quote(raw)
	}
	shown := strconv.Quote((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String())
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		shown += " (its user, query and fragment not shown)"
	}
	return shown
}

// CheckOrigin holds an http.allowed_origins entry to the form a browser
// sends in its Origin header (RFC 6454 §6.2), which the front compares it
// with byte for byte: scheme and host in lower case, the host in ASCII
// (an internationalized one as IDNA writes it, xn--…), and no port where
// it is the scheme's default. An entry of another spelling matched no
// request, and its refusal told the operator to add the origin they had.
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s is not an origin: scheme://host[:port], as a browser's Origin header names one", ShownURL(origin))
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	for _, r := range host {
		if r >= utf8.RuneSelf {
			return fmt.Errorf("%q: a browser sends an internationalized host as IDNA writes it (xn--…), which is what to write", origin)
		}
	}
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	sent := strings.ToLower(u.Scheme) + "://" + host
	if addr, err := netip.ParseAddr(host); err == nil && addr.Is6() {
		// As the URL standard serializes an IPv6 host: compressed.
		sent = strings.ToLower(u.Scheme) + "://[" + addr.String() + "]"
	}
	if port != "" {
		sent += ":" + port
	}
	if sent != origin {
		return fmt.Errorf("%q is not spelled as a browser sends it, and would match no request: write %q", origin, sent)
	}
	return nil
}

// ErrIssuerInsecure is CheckIssuer's error for an issuer of plain http off
// loopback.
var ErrIssuerInsecure = errors.New("plain http is allowed on loopback only")

// LoopbackURL returns http://<listen> when listen is a loopback address
// (localhost, 127.0.0.0/8, ::1) with a port: the URL a server listening
// there is reached at. Any other address has no such URL: only the
// operator knows the name clients use.
func LoopbackURL(listen string) (string, bool) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return "", false
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", false
	}
	return "http://" + net.JoinHostPort(host, port), true
}

// CheckPublicURL refuses a public URL that is not an http or https origin:
// a scheme and a host (and port), with no user, path, query or fragment.
// MCP is served at /mcp under it, and RFC 9728 places the metadata at
// /.well-known/oauth-protected-resource/mcp, both from the origin.
func CheckPublicURL(public string) error {
	u, err := url.Parse(public)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Hostname() == "":
		return fmt.Errorf("%s is not an absolute http or https URL", ShownURL(public))
	case u.User != nil:
		return fmt.Errorf("%s holds a user: name the server only", ShownURL(public))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(public, "#"):
		return fmt.Errorf("%s has a query or fragment: name the server only", ShownURL(public))
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("%s has a path: name the server's origin only (MCP is served at /mcp under it)", ShownURL(public))
	}
	return nil
}

// HTTP configures the HTTP front.
type HTTP struct {
	// Listen is the address to serve on. Defaults to HTTPListenDefault.
	Listen string `yaml:"listen"`
	// PublicURL is the origin clients reach this server at, such as
	// https://mcp.example.com: the 401 challenge and the protected-resource
	// metadata name it, never the Host a request claims. Required unless
	// Listen is a loopback address; then it defaults to http://<listen>.
	PublicURL string `yaml:"public_url"`
	// AllowedOrigins are the browser origins that may call; a request
	// with any other Origin is refused. Defaults to none.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MaxBodyBytes caps a request body. Defaults to MaxBodyBytesDefault.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// TrustedProxyHops is how many proxies in front of orangerail append
	// to X-Forwarded-For; 0 trusts no header and uses the socket's peer.
	TrustedProxyHops int `yaml:"trusted_proxy_hops"`
	// TrustedProxies are the networks (CIDRs) the proxies nearest the
	// server connect from: X-Forwarded-For is read only from a peer
	// within one, and a peer outside every one — a client that reached
	// the server around its proxies — is its own address. Empty: the
	// header is read from every peer.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// TranslationPrefixes are the IPv6 prefixes of the operator's own
	// NAT64 translators (RFC 6052 network-specific prefixes, of length 32,
	// 40, 48, 56, 64 or 96): an address within one stands for the IPv4
	// client it embeds, which the failed-auth throttle counts alone, as it
	// counts one behind 64:ff9b::/96. Defaults to none.
	TranslationPrefixes []string   `yaml:"translation_prefixes"`
	RateLimits          RateLimits `yaml:"rate_limits"`
}

// RateLimits bound calls per caller and failed authentications per address.
type RateLimits struct {
	// ReadsPerMinute bounds a caller's read tool calls and other requests.
	// Defaults to 120.
	ReadsPerMinute int `yaml:"reads_per_minute"`
	// WritesPerMinute bounds a caller's action and check_approval calls, and
	// any call whose class cannot be told. Defaults to 20.
	WritesPerMinute int `yaml:"writes_per_minute"`
	// FailedAuthPerMinute bounds failed authentications per client address.
	// Defaults to 20.
	FailedAuthPerMinute int `yaml:"failed_auth_per_minute"`
	// Store is where the counters are kept. Defaults to
	// RateLimitStoreDefault.
	Store RateLimitStore `yaml:"store"`
	// OnStoreError is what happens while the counters cannot be read.
	// Defaults to OnStoreErrorDefault.
	OnStoreError FailureMode `yaml:"on_store_error"`
	// FlushInterval is how often a replica sends its counts to the postgres
	// store and reads back the other replicas'. Defaults to
	// FlushIntervalDefault.
	FlushInterval Duration `yaml:"flush_interval"`
	// LocalSharePercent is the percent of a limit one replica may admit
	// between two of its flushes, rounded down (Share): with N replicas a
	// window admits at most limit + (N-1) × share. A limit whose share is
	// 0 is counted exactly, one write per request. Defaults to
	// LocalSharePercentDefault.
	LocalSharePercent *int `yaml:"local_share_percent"`
}

// Share is how many hits of a window whose limit is limit one replica may
// admit between two of its flushes: LocalSharePercent of limit, rounded
// down.
func (r RateLimits) Share(limit int) int {
	p := LocalSharePercentDefault
	if r.LocalSharePercent != nil {
		p = *r.LocalSharePercent
	}
	return limit * p / 100
}

// RateLimitStore is where rate-limit counters are kept.
type RateLimitStore string

// The rate-limit stores.
const (
	// RateLimitPostgres keeps the counters in the service database, so
	// every replica of a deployment shares one allowance.
	RateLimitPostgres RateLimitStore = "postgres"
	// RateLimitMemory keeps the counters in the process: for a single
	// replica.
	RateLimitMemory RateLimitStore = "memory"
)

// RateLimitStores returns every rate-limit store. The config schema's enum
// for http.rate_limits.store is this list; a test holds them equal.
func RateLimitStores() []RateLimitStore { return []RateLimitStore{RateLimitPostgres, RateLimitMemory} }

// FailureMode is what a check does when it cannot run.
type FailureMode string

// The failure modes.
const (
	// FailClosed refuses what the check would have judged.
	FailClosed FailureMode = "closed"
	// FailOpen allows it.
	FailOpen FailureMode = "open"
)

// FailureModes returns every failure mode. The config schema's enum for
// http.rate_limits.on_store_error is this list; a test holds them equal.
func FailureModes() []FailureMode { return []FailureMode{FailClosed, FailOpen} }

// Defaults of the HTTP front.
const (
	HTTPListenDefault   = "127.0.0.1:8080"
	MaxBodyBytesDefault = 1 << 20
	// BodyEnvelopeBytes is the room a request body's default bound keeps
	// beside limits.max_input_bytes for the JSON-RPC envelope around an
	// action's input.
	BodyEnvelopeBytes          = 64 << 10
	ReadsPerMinuteDefault      = 120
	WritesPerMinuteDefault     = 20
	FailedAuthPerMinuteDefault = 20
	RateLimitStoreDefault      = RateLimitPostgres
	OnStoreErrorDefault        = FailClosed
	FlushIntervalDefault       = 200 * time.Millisecond
	LocalSharePercentDefault   = 10
)

// WebhookEvent is an approval event a webhook may subscribe to: the
// store's closed set, which its outbox's CHECK constraint holds.
type WebhookEvent = store.WebhookEvent

// The webhook events.
const (
	WebhookApprovalPending  = store.WebhookApprovalPending
	WebhookApprovalApproved = store.WebhookApprovalApproved
	WebhookApprovalRejected = store.WebhookApprovalRejected
	WebhookApprovalExpired  = store.WebhookApprovalExpired
)

// WebhookEvents returns every webhook event. The config schema's enum for
// webhooks[].events is this list; a test holds them equal.
func WebhookEvents() []WebhookEvent { return store.WebhookEvents() }

// Webhook is one endpoint told of approval events, signed per the
// Standard Webhooks convention.
type Webhook struct {
	// URL receives the POSTs: https, or http on loopback. It is the
	// endpoint's identity in the outbox, so two endpoints never share one.
	URL string `yaml:"url"`
	// SecretEnv names the environment variable holding the signing secret,
	// written whsec_ and base64. The secret itself is never in the file.
	SecretEnv string `yaml:"secret_env"`
	// Events are the events sent. Defaults to every event.
	Events []WebhookEvent `yaml:"events"`
	// IncludeInput adds the approval's verbatim input to the payload.
	// Defaults to false: the input can hold what the endpoint should not
	// see.
	IncludeInput bool `yaml:"include_input"`
	// Tenants are the tenants whose events the endpoint is sent, and
	// whose inputs, with IncludeInput. Defaults to every tenant: an
	// endpoint that serves one team names its tenant, or it hears of
	// every tenant's approvals.
	Tenants []string `yaml:"tenants"`
}

// Subscribes reports whether the endpoint is sent ev.
func (w Webhook) Subscribes(ev WebhookEvent) bool {
	return len(w.Events) == 0 || slices.Contains(w.Events, ev)
}

// Serves reports whether the endpoint is sent tenant's events.
func (w Webhook) Serves(tenant string) bool {
	return len(w.Tenants) == 0 || slices.Contains(w.Tenants, tenant)
}

// Scoped reports whether any of hooks is sent only some tenants' events.
func Scoped(hooks []Webhook) bool {
	return slices.ContainsFunc(hooks, func(h Webhook) bool { return len(h.Tenants) > 0 })
}

// WebhookRoutesFor is WebhookRoutes for tenant's transactions: of hooks,
// only the endpoints that serve tenant, so a message of a tenant is never
// owed to an endpoint scoped to others.
func WebhookRoutesFor(hooks []Webhook, tenant string) string {
	if len(hooks) == 0 {
		return "off"
	}
	served := slices.DeleteFunc(slices.Clone(hooks), func(h Webhook) bool { return !h.Serves(tenant) })
	if len(served) == 0 {
		// The instance names endpoints, none of them this tenant's: its
		// events are queued for none ("{}"), not "off", which retires
		// an instance's backlog (migrations/00044).
		return "{}"
	}
	return WebhookRoutes(served)
}

// WebhookRouter is WebhookRoutesFor of hooks, each tenant's routes
// computed once here rather than at every transaction of the tenant's:
// those of each tenant an endpoint names, and those every other tenant
// shares (the endpoints that name none).
func WebhookRouter(hooks []Webhook) func(tenant string) string {
	named := map[string]string{}
	for _, h := range hooks {
		for _, t := range h.Tenants {
			if _, ok := named[t]; !ok {
				named[t] = WebhookRoutesFor(hooks, t)
			}
		}
	}
	other := WebhookRoutesFor(hooks, "") // no tenant's id: served by the unscoped alone
	return func(tenant string) string {
		if r, ok := named[tenant]; ok {
			return r
		}
		return other
	}
}

// CheckWebhookURL refuses an endpoint URL that is not https (plain http is
// allowed on loopback only), or that holds a user or a fragment: a
// password in a URL ends up in logs, and the secret is the credential.
// Its refusals name the URL as ShownWebhookURL does: the URL refused may
// hold the very password, or the path a receiver keeps its secret in, that
// an error printed at start-up would put in a log.
func CheckWebhookURL(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Hostname() == "" || u.Opaque != "":
		return errors.New("the URL is not an absolute URL (scheme://host/path)")
	case u.User != nil:
		return fmt.Errorf("%s holds a user: the signing secret is the endpoint's credential", ShownWebhookURL(endpoint))
	case u.Fragment != "" || strings.Contains(endpoint, "#"):
		return fmt.Errorf("%s has a fragment, which is never sent", ShownWebhookURL(endpoint))
	case u.Scheme == "https":
		return nil
	}
	if u.Scheme == "http" && LoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%s must be https (plain http is allowed on loopback only)", ShownWebhookURL(endpoint))
}

// ShownWebhookURL is an endpoint URL as errors, logs, last_error and a
// listing's delivered_to show it: its scheme and host, never its user, path
// or query, which a receiver's URL may carry its secret in (a chat
// service's hook).
func ShownWebhookURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an endpoint whose URL does not parse"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// WebhookKey names the endpoint at url in a webhook message's owed_to:
// the first 8 bytes of the URL's SHA-256, in hex. Not the URL: it can hold
// the receiver's secret, and the engine sends the keys as text with each
// transaction (WebhookRoutes), where a server's statement log keeps them.
func WebhookKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

// WebhookRoutes is what the engine's transactions set orangerail.webhooks
// to (database.Bounded's Webhooks) for hooks, the config's webhooks: a JSON
// object naming, for each event an endpoint subscribes to, the keys
// (WebhookKey) of the endpoints subscribed, which the approvals' trigger
// records in the message it queues (migrations/00048). An event no
// endpoint subscribes to is queued for none. "off" where hooks is empty:
// no message at all (migrations/00044).
func WebhookRoutes(hooks []Webhook) string {
	if len(hooks) == 0 {
		return "off"
	}
	routes := map[WebhookEvent][]string{}
	for _, h := range hooks {
		for _, ev := range WebhookEvents() {
			if h.Subscribes(ev) {
				routes[ev] = append(routes[ev], WebhookKey(h.URL))
			}
		}
	}
	out, err := json.Marshal(routes)
	if err != nil {
		panic(err) // a map of strings to strings marshals
	}
	return string(out)
}

// SQLQuery configures the read-only SQL tool.
type SQLQuery struct {
	// Enabled offers the sql_query tool. Defaults to false.
	Enabled bool `yaml:"enabled"`
	// Roles may call it (any one of them). Required when enabled.
	Roles []string `yaml:"roles"`
	// Schemas are the search path a query sees. Defaults to orangerail.
	Schemas []string `yaml:"schemas"`
	// Audience, when set, is a CEL predicate over caller that must also
	// be true for the tool to be offered.
	Audience string `yaml:"audience"`
	// URLEnv names the environment variable holding the URL the query
	// login (orangerail_query) connects with. Defaults to the service
	// database's URL with that user.
	URLEnv string `yaml:"url_env"`

	audience cel.Program
}

// AudienceProgram returns the compiled sql_query.audience, or nil when it
// has none.
func (q *SQLQuery) AudienceProgram() cel.Program { return q.audience }

// SQLQueryTool is the read-only SQL tool's name.
const SQLQueryTool = "sql_query"

// Approvals configures the approval gate.
type Approvals struct {
	// TTL is how long an approval stays open: at least ApprovalTTLMin.
	// Defaults to ApprovalTTLDefault.
	TTL Duration `yaml:"ttl"`
	// ApproverRole is the role a person needs to decide. Defaults to
	// ApproverRoleDefault.
	ApproverRole string `yaml:"approver_role"`
	// AuditorRole is the role a person needs to read the audit log through
	// the approvals API (an approver role also reads it). Defaults to
	// AuditorRoleDefault.
	AuditorRole string `yaml:"auditor_role"`
	// FourEyes, when true, refuses an approver who is the requester.
	// Defaults to true.
	FourEyes *bool `yaml:"four_eyes"`
	// SealInputs, when true, stores each staged input AES-256-GCM
	// encrypted under a data key of its own (wrapped under the key ring's
	// active key) and has audit records carry the input's digest instead
	// of the input. Defaults to false.
	SealInputs bool `yaml:"seal_inputs"`
	// Retention is how long a sealed input stays readable after its
	// approval ended (consumed, rejected, expired); then the sweeper
	// deletes its data key (crypto-shredding). Nil (the default): kept.
	// Zero shreds it at the first sweep after the approval ended: a
	// pointer, so that "0d" is not read as absent and kept for ever.
	Retention *Days `yaml:"retention"`
}

// Days is a duration written as Go writes one (36h) or in whole days
// (90d): a retention is counted in days.
type Days time.Duration

// UnmarshalYAML reads a duration or a whole number of days. The schema
// has admitted its form: what is refused here is too long to hold, and
// refused at its path.
func (d *Days) UnmarshalYAML(node *yaml.Node) error {
	if n, ok := strings.CutSuffix(node.Value, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return &nodeError{node: node, msg: fmt.Sprintf("%q is not a number of days this server holds (at most 65535d)", node.Value)}
		}
		*d = Days(time.Duration(days) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(node.Value)
	if err != nil {
		return &nodeError{node: node, msg: fmt.Sprintf("%q is not a duration this server holds (at most some 2562047h)", node.Value)}
	}
	*d = Days(v)
	return nil
}

// Audit tunes the audit chain's sealing.
type Audit struct {
	// SealInterval is how often each replica seals the records committed
	// since (a record waits about half of it for its seq and link, and at
	// most about all of it). Defaults to SealIntervalDefault; 1ms to 1m.
	SealInterval Duration `yaml:"seal_interval"`
	// Checkpoint, when set, has every serving replica sign checkpoints of
	// each tenant's sealed log (package checkpoint). Nil: none are signed.
	Checkpoint *AuditCheckpoint `yaml:"checkpoint"`
}

// AuditCheckpoint configures signed checkpoints: the Ed25519 signed-note
// signer key, read from exactly one of KeyFile and KeyEnv, how often each
// replica signs, and the deployment's origin.
type AuditCheckpoint struct {
	// KeyFile is a file holding the signer key (PRIVATE+KEY+...).
	KeyFile string `yaml:"key_file"`
	// KeyEnv is an environment variable holding the signer key.
	KeyEnv string `yaml:"key_env"`
	// Interval is how often each replica signs the tenants' logs that
	// grew. Defaults to CheckpointIntervalDefault; 1s to 24h.
	Interval Duration `yaml:"interval"`
	// Origin names the deployment in each checkpoint's origin line,
	// "<origin>/<tenant>": a schema-less URL such as
	// audit.example.com/acme-orders. Defaults to orangerail/<service>.
	Origin string `yaml:"origin"`
}

// CheckpointIntervalDefault is audit.checkpoint.interval's default.
const CheckpointIntervalDefault = time.Minute

// SealIntervalDefault is audit.seal_interval's default.
const SealIntervalDefault = 50 * time.Millisecond

// SealIntervalMax bounds audit.seal_interval: a record unsealed for long
// has no place in the chain that proves it unchanged.
const SealIntervalMax = time.Minute

// Limits bound what one call may carry and how long it may wait.
type Limits struct {
	// MaxInputBytes caps an action call's input, as sent; a larger input
	// is refused (X_INPUT_TOO_LARGE) before it is parsed. Defaults to
	// MaxInputBytesDefault.
	MaxInputBytes int `yaml:"max_input_bytes"`
	// LockTimeout bounds each wait for a lock in every transaction
	// orangerail runs, on its own database and the datasource (Postgres's
	// lock_timeout): a row another transaction holds longer fails the call
	// instead of hanging it. Defaults to LockTimeoutDefault; read it with
	// Timeouts.
	LockTimeout *Duration `yaml:"lock_timeout"`
	// StatementTimeout bounds each statement of those transactions
	// (statement_timeout), an effect's included. Defaults to
	// StatementTimeoutDefault; read it with Timeouts.
	StatementTimeout *Duration `yaml:"statement_timeout"`
	// IdempotencyTTL is how long the first result of an idempotent
	// action's call stays filed under its key; a retry after that runs
	// again. Defaults to IdempotencyTTLDefault; read it with
	// IdempotencyKeyTTL.
	IdempotencyTTL *Duration `yaml:"idempotency_ttl"`
}

// IdempotencyTTLDefault is the default Limits.IdempotencyTTL.
const IdempotencyTTLDefault = 24 * time.Hour

// IdempotencyKeyTTL returns limits.idempotency_ttl, its default where unset.
func (l Limits) IdempotencyKeyTTL() time.Duration {
	if l.IdempotencyTTL != nil {
		return time.Duration(*l.IdempotencyTTL)
	}
	return IdempotencyTTLDefault
}

// Defaults and bounds of Limits.
const (
	// MaxInputBytesDefault is the default Limits.MaxInputBytes: 64 KiB.
	MaxInputBytesDefault    = 64 << 10
	LockTimeoutDefault      = 5 * time.Second
	StatementTimeoutDefault = 30 * time.Second
	// TimeoutMax bounds both timeouts: a wait of a day is a hang.
	TimeoutMax = 24 * time.Hour
)

// Timeouts returns the lock and statement timeouts, their defaults where
// unset. Each is at least a millisecond: Postgres reads 0 as no limit.
func (l Limits) Timeouts() (lock, statement time.Duration) {
	lock, statement = LockTimeoutDefault, StatementTimeoutDefault
	if l.LockTimeout != nil {
		lock = time.Duration(*l.LockTimeout)
	}
	if l.StatementTimeout != nil {
		statement = time.Duration(*l.StatementTimeout)
	}
	return lock, statement
}

// Duration is a time.Duration written as Go writes one ("24h", "90m").
type Duration time.Duration

// UnmarshalYAML parses a duration string. The schema admits only its
// form; one too long to hold (99999999999h) fails here, at its node.
//
// A zero is read as zeroWritten, which Parse refuses at its path beside
// every other problem (zeroDurations): every duration setting reads zero
// as absent (its default), so "0s" would be read as whatever the default
// is, never as the none or the at-once its writer meant.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	v, err := time.ParseDuration(node.Value)
	if err != nil {
		return &nodeError{node: node, msg: fmt.Sprintf("%q is not a duration this server holds (at most some 2562047h)", node.Value)}
	}
	if v == 0 {
		v = time.Duration(zeroWritten)
	}
	*d = Duration(v)
	return nil
}

// zeroWritten is what Duration.UnmarshalYAML makes of a zero the file
// wrote: no setting holds it (the schema admits no sign), so it tells a
// zero written from a setting left out until zeroDurations takes it.
const zeroWritten = Duration(math.MinInt64)

var durationType = reflect.TypeFor[Duration]()

// zeroDurations adds to problems one at each Duration under v, at path,
// that the file wrote as zero, and makes it zero, left out, so that its
// default applies and the config's checks run on: every problem of the
// file is reported at once.
func zeroDurations(v reflect.Value, path []string, problems *Problems) {
	written := func(d reflect.Value) bool {
		if Duration(d.Int()) != zeroWritten {
			return false
		}
		*problems = append(*problems, Problem{Path: fieldPath(path),
			Message: "is zero, which this setting does not take: leave the setting out for its default, or give a duration above zero"})
		return true
	}
	switch {
	case v.Type() == durationType:
		if written(v) {
			v.SetInt(0)
		}
		return
	case v.Kind() == reflect.Pointer && v.Type().Elem() == durationType:
		// A *Duration left out is nil: that, not zero, is absent.
		if !v.IsNil() && written(v.Elem()) {
			v.SetZero()
		}
		return
	}
	// An interface holds what YAML decodes into any (an input schema): no
	// Duration is decoded there.
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			zeroDurations(v.Elem(), path, problems)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != durationType.PkgPath() {
			return // a value of another package's (a compiled schema, a time) holds no setting
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, flags, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "-":
				continue
			case flags == "inline" || (name == "" && f.Anonymous):
				zeroDurations(v.Field(i), path, problems)
				continue
			case name == "":
				name = strings.ToLower(f.Name)
			}
			zeroDurations(v.Field(i), append(slices.Clip(path), name), problems)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			zeroDurations(v.Index(i), append(slices.Clip(path), strconv.Itoa(i)), problems)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			// A map's element cannot be set in place: walked as a copy,
			// and the copy put back.
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			zeroDurations(elem, append(slices.Clip(path), k.String()), problems)
			v.SetMapIndex(k, elem)
		}
	}
}

// nodeError is a value the schema admits that does not decode, and the
// node it is at, which Parse names the path of.
type nodeError struct {
	node *yaml.Node
	msg  string
}

func (e *nodeError) Error() string { return e.msg }

// valueProblems is err, of reading doc, as Problems: a nodeError at its
// node's path, any other at none.
func valueProblems(doc *yaml.Node, err error) Problems {
	if ne, ok := errors.AsType[*nodeError](err); ok {
		path, _ := nodePath(doc, ne.node, nil)
		return Problems{{Path: fieldPath(path), Message: ne.msg}}
	}
	return Problems{{Path: "", Message: err.Error()}}
}

// nodePath returns the path of target in the tree under n (a document's
// root mapping's keys, then each key or index below), and whether it is
// there.
func nodePath(n, target *yaml.Node, path []string) ([]string, bool) {
	if n == target {
		return path, true
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p, ok := nodePath(c, target, path); ok {
				return p, true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if p, ok := nodePath(n.Content[i+1], target, append(path, n.Content[i].Value)); ok {
				return p, true
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if p, ok := nodePath(c, target, append(path, strconv.Itoa(i))); ok {
				return p, true
			}
		}
	}
	return nil, false
}

// ReadAccessKind says who may read an object.
type ReadAccessKind string

// The read access kinds.
const (
	ReadPublic        ReadAccessKind = "public"
	ReadAuthenticated ReadAccessKind = "authenticated"
	ReadRoles         ReadAccessKind = "roles"
)

// ReadAccess is who may read an object: anyone, any authenticated caller,
// or callers holding one of Roles.
type ReadAccess struct {
	Kind  ReadAccessKind
	Roles []string
}

// UnmarshalYAML reads `public`, `authenticated` or `{roles: [...]}`.
func (r *ReadAccess) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		r.Kind = ReadAccessKind(node.Value)
		return nil
	}
	var v struct {
		Roles []string `yaml:"roles"`
	}
	if err := node.Decode(&v); err != nil {
		return err
	}
	r.Kind, r.Roles = ReadRoles, v.Roles
	return nil
}

// Object is something an agent may read: rows of one table, scoped to the
// caller's tenant.
type Object struct {
	Title        string     `yaml:"title"`
	Description  string     `yaml:"description"`
	Table        string     `yaml:"table"`
	Key          string     `yaml:"key"`
	TenantColumn string     `yaml:"tenant_column"`
	Fields       []string   `yaml:"fields"`
	ReadAccess   ReadAccess `yaml:"read_access"`
	// Audience, when set, is a CEL predicate over caller that must also
	// be true for the object's tools to be offered and its rows read.
	Audience string   `yaml:"audience"`
	List     ListSpec `yaml:"list"`

	audience cel.Program
}

// AudienceProgram returns the object's compiled audience predicate, or nil
// when it has none.
func (o *Object) AudienceProgram() cel.Program { return o.audience }

// FilterOp is a comparison a list may filter by.
type FilterOp string

// The filter operators.
const (
	FilterEq  FilterOp = "eq"
	FilterNe  FilterOp = "ne"
	FilterIn  FilterOp = "in"
	FilterGt  FilterOp = "gt"
	FilterGte FilterOp = "gte"
	FilterLt  FilterOp = "lt"
	FilterLte FilterOp = "lte"
)

// ListSpec is what a list of an object may filter and sort by.
type ListSpec struct {
	Filters map[string][]FilterOp `yaml:"filters"`
	Sort    []string              `yaml:"sort"`
	// MaxLimit caps a page. Defaults to ListMaxLimitDefault.
	MaxLimit int `yaml:"max_limit"`
}

// Link joins one object's field to another's.
type Link struct {
	From        string `yaml:"from"`
	To          string `yaml:"to"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
}

// ApprovalPolicy says whether an action waits for a person.
type ApprovalPolicy string

// The approval policies.
const (
	ApprovalNone     ApprovalPolicy = "none"
	ApprovalRequired ApprovalPolicy = "required"
)

// IdempotencyKeyArg is the reserved, optional argument of an idempotent
// action's tool: the key a retry sends so that it gets the first call's
// result instead of running again. It is never part of the action's input.
const IdempotencyKeyArg = "idempotencyKey"

// Action is something an agent may ask to do.
type Action struct {
	Title       string         `yaml:"title"`
	Description string         `yaml:"description"`
	Target      *Target        `yaml:"target"`
	Input       map[string]any `yaml:"input"`
	Where       string         `yaml:"where"`
	Policy      Policy         `yaml:"policy"`
	// Destructive is what the config declares: nil when it says nothing.
	// An action not declared destructive: false is assumed destructive
	// (DestructiveHint); one declared destructive: true must also wait for
	// a person or say why not (DeclaredDestructive).
	Destructive *bool `yaml:"destructive"`
	// ApprovalWaived is the written reason a destructive action runs
	// without approval; without it, a destructive action must require
	// approval. Shown wherever the action is described.
	ApprovalWaived string  `yaml:"approval_waived"`
	Idempotent     bool    `yaml:"idempotent"`
	Execute        Execute `yaml:"execute"`
	Effect         string  `yaml:"effect"`
	Rollback       string  `yaml:"rollback"`
	// RedactAudit lists the paths of input values masked in audit records:
	// JSON pointers, or bare top-level names. Set alone, on an action with
	// a target, it withholds the prior state from audit records: the masks
	// name the input, not the row, and a row masked by the input's names
	// would be half masked.
	RedactAudit []string `yaml:"redact_audit"`
	// RedactPrior lists the paths masked in the prior state audit records
	// keep, each beginning with one of the target object's fields.
	RedactPrior []string `yaml:"redact_prior"`
	// RedactResult lists the paths masked in the result an
	// execution_succeeded record keeps.
	RedactResult []string `yaml:"redact_result"`
	// Budget overrides the call budget of the action's risk class (budget.go).
	Budget *Budget `yaml:"budget"`
	// Environments, when set, are the only environments (the config's
	// environment) the action is served in: elsewhere it is withdrawn at
	// load (Config.Unserved), as if it were not declared.
	Environments []string `yaml:"environments"`

	inputSchema                         *Validator
	where, audience                     cel.Program
	auditMasks, priorMasks, resultMasks []Pointer
}

// DeclaredDestructive reports whether the config declares the action
// destructive: true. Only such an action must require approval or carry
// approval_waived, and only that declaration is part of its definition.
func (a *Action) DeclaredDestructive() bool { return a.Destructive != nil && *a.Destructive }

// DestructiveHint reports whether a client should treat the action as
// destructive: unless the config declares destructive: false, an action
// nobody described is assumed to be.
func (a *Action) DestructiveHint() bool { return a.Destructive == nil || *a.Destructive }

// AuditMasks returns the parsed paths of redact_audit.
func (a *Action) AuditMasks() []Pointer { return a.auditMasks }

// PriorMasks returns the parsed paths of redact_prior.
func (a *Action) PriorMasks() []Pointer { return a.priorMasks }

// ResultMasks returns the parsed paths of redact_result.
func (a *Action) ResultMasks() []Pointer { return a.resultMasks }

// WithholdsPrior reports whether audit records leave out the target's
// prior state: the input is masked but the row is given no masks of its
// own.
func (a *Action) WithholdsPrior() bool { return len(a.RedactAudit) > 0 && len(a.RedactPrior) == 0 }

// AudienceProgram returns the action's compiled policy.audience, or nil
// when it has none.
func (a *Action) AudienceProgram() cel.Program { return a.audience }

// InputSchema returns the action's compiled input schema.
func (a *Action) InputSchema() *Validator { return a.inputSchema }

// WhereProgram returns the action's compiled precondition, or nil when it
// has none.
func (a *Action) WhereProgram() cel.Program { return a.where }

// Target is what an action acts on: the object row found by the input
// property KeyFrom, or what an upstream answers to a GET (Upstream and
// Get). Either is read before staging and again after the consume, and
// the precondition evaluated on it each time; only a row is locked.
type Target struct {
	Object  string `yaml:"object"`
	KeyFrom string `yaml:"key_from"`
	// Upstream names the upstream whose answer to Get is the target: its
	// parsed JSON object, 2xx; a 404 means there is none. The omitempty
	// tags keep the definition hash of a row target what it was.
	Upstream string `yaml:"upstream" json:",omitempty"`
	// Get is the read: an http execute whose method is GET and whose
	// retry is safe, its path, query and headers bound from the input by
	// name as an execute's are.
	Get *HTTPExecute `yaml:"get" json:",omitempty"`
}

// Read reports whether the target is read from an upstream rather than
// a table.
func (t *Target) Read() bool { return t != nil && t.Upstream != "" }

// Policy is who may call an action and whether it waits for approval.
type Policy struct {
	// Approval defaults to ApprovalNone.
	Approval ApprovalPolicy `yaml:"approval"`
	Roles    []string       `yaml:"roles"`
	Scope    string         `yaml:"scope"`
	// Audience, when set, is a CEL predicate over caller that must also
	// be true for the action's tool to be offered (beside Roles).
	Audience string `yaml:"audience"`
	// ApproverRoles are the roles of which a person needs one to decide
	// this action's approvals. Defaults to approvals.approver_role.
	ApproverRoles []string `yaml:"approver_roles"`
	// approverRolesWritten: the config wrote ApproverRoles, where the
	// defaults filled them otherwise; on an action whose calls never wait
	// for a person, a list written is a mistake the defaults' is not.
	approverRolesWritten bool
}

// ExecuteKind names what an action's execute does: which member of the
// Execute union is set.
type ExecuteKind string

// The execute kinds.
const (
	// ExecuteSQL runs one statement on the datasource: execute: {sql: …}.
	ExecuteSQL ExecuteKind = "sql"
	// ExecuteNotImplemented declares an action with no effect yet; a call
	// is recorded and refused: execute: {not_implemented: true}.
	ExecuteNotImplemented ExecuteKind = "not_implemented"
	// ExecuteHTTP calls an upstream's HTTP API: execute: {http: {…}}.
	ExecuteHTTP ExecuteKind = "http"
	// --- soap (issue 14 item 6) ---
	// ExecuteSOAP calls an upstream's SOAP operation: execute: {soap: {…}}.
	ExecuteSOAP ExecuteKind = "soap"
	// --- end soap ---
)

// ExecuteKinds lists every execute kind.
func ExecuteKinds() []ExecuteKind {
	return []ExecuteKind{ExecuteSQL, ExecuteNotImplemented, ExecuteHTTP, ExecuteSOAP}
}

// Execute is what an action does: a union of which exactly one member is
// set, the member's key naming its kind (the config schema holds a file to
// one). A new kind of effect is a new member, its key the kind's name —
// execute: {http: {…}} beside execute: {sql: "…"} — validated in
// validateExecute and made into an effect by the kind's implementation.
type Execute struct {
	// SQL is a statement with :named input parameters, run on the
	// datasource (kind sql).
	SQL string `yaml:"sql"`
	// NotImplemented declares the action without an effect (kind
	// not_implemented).
	NotImplemented bool `yaml:"not_implemented"`
	// HTTP is a call of an upstream's API (kind http; upstream.go).
	HTTP *HTTPExecute `yaml:"http"`
	// --- soap (issue 14 item 6) ---
	// SOAP is a call of an upstream's SOAP operation (kind soap; soap.go).
	SOAP *SOAPExecute `yaml:"soap"`
	// --- end soap ---
}

// Kind returns which member of the union is set; "" for none, which a
// loaded config never holds.
func (x Execute) Kind() ExecuteKind {
	switch {
	case x.SQL != "":
		return ExecuteSQL
	case x.NotImplemented:
		return ExecuteNotImplemented
	case x.HTTP != nil:
		return ExecuteHTTP
	// --- soap (issue 14 item 6) ---
	case x.SOAP != nil:
		return ExecuteSOAP
		// --- end soap ---
	}
	return ""
}

// OpenWorld reports whether the kind's effect reaches a system outside the
// service's own datasource: an upstream's API.
func (k ExecuteKind) OpenWorld() bool { return k == ExecuteHTTP || k == ExecuteSOAP }

// MaxConfigBytes bounds a config file: a compiled policy's hundreds of
// tools fit many times over (Discord's whole API, its 113 servable
// actions, is some 290 KiB), and a device or a pipe that never ends is
// refused, not read until memory runs out.
const MaxConfigBytes = 8 << 20

// MaxConfigNodes bounds a config's YAML nodes (every key, value and
// element): Discord's whole API is some 19,000. Reading a file costs some
// 150 bytes of memory for each of its bytes, in copies of its tree (the
// values, their JSON, the schema's check); past the bound a file is
// refused before any copy is made, so that MaxConfigBytes of one-digit
// list items costs hundreds of megabytes, not gigabytes.
const MaxConfigNodes = 500_000

// countNodes counts the nodes of the tree under n, up to limit.
func countNodes(n *yaml.Node, limit int) int {
	count, stack := 0, []*yaml.Node{n}
	for len(stack) > 0 && count < limit {
		top := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], top.Content...)
		count++
	}
	return count
}

// Parse checks a config file's bytes: its shape against Schema, then
// every rule the schema cannot say (tool names, references, input schemas,
// CEL preconditions, SQL parameters). On any problem it returns Problems.
func Parse(data []byte) (*Config, error) {
	doc, err := yamldoc.Decode(data)
	if errors.Is(err, yamldoc.ErrMoreDocuments) {
		return nil, Problems{{Path: "", Message: err.Error()}}
	}
	if err != nil {
		return nil, Problems{{Path: "", Message: "not valid YAML: " + err.Error()}}
	}
	if len(doc.Content) == 0 {
		return nil, Problems{{Path: "", Message: "the file is empty"}}
	}
	if nodes := countNodes(&doc, MaxConfigNodes+1); nodes > MaxConfigNodes {
		return nil, Problems{{Path: "", Message: fmt.Sprintf("the file holds more than %d YAML nodes (keys, values and list items), more than any config", MaxConfigNodes)}}
	}
	instance, err := jsonValue(&doc)
	if err != nil {
		return nil, valueProblems(&doc, err)
	}
	if problems := shapeProblems(instance); len(problems) > 0 {
		return nil, problems
	}
	cfg := &Config{}
	if err := doc.Decode(cfg); err != nil {
		// The schema admits only the forms that decode, not every value
		// of them: one is refused at its place.
		return nil, valueProblems(&doc, err)
	}
	var zeros Problems
	zeroDurations(reflect.ValueOf(cfg), nil, &zeros)
	cfg.withDefaults()
	if problems := cfg.fromEnvironment(os.Getenv); len(problems) > 0 {
		return nil, append(zeros, problems...).sorted()
	}
	if problems := append(zeros, cfg.validate()...); len(problems) > 0 {
		return nil, problems.sorted()
	}
	cfg.withdrawUnserved()
	return cfg, nil
}

// fromEnvironment fills what the config names an environment variable
// for: the OIDC issuer (identity.oidc.issuer_env).
func (c *Config) fromEnvironment(getenv func(string) string) Problems {
	o := c.Identity.OIDC
	if o == nil {
		return nil
	}
	switch {
	case o.Issuer != "" && o.IssuerEnv != "":
		return Problems{{Path: "identity.oidc.issuer_env", Message: "is set beside identity.oidc.issuer: name the issuer one way"}}
	case o.Issuer == "" && o.IssuerEnv == "":
		return Problems{{Path: "identity.oidc", Message: "needs issuer, or issuer_env naming the environment variable that holds it"}}
	case o.IssuerEnv != "":
		if o.Issuer = getenv(o.IssuerEnv); o.Issuer == "" {
			return Problems{{Path: "identity.oidc.issuer_env", Message: fmt.Sprintf("$%s is not set: set it to the issuer URL", o.IssuerEnv)}}
		}
	}
	return nil
}

// jsonValue turns the YAML document into the value encoding/json would
// decode from the same data, for the schema validator.
func jsonValue(doc *yaml.Node) (any, error) {
	if err := plainScalars(doc); err != nil {
		return nil, err
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the file must be a mapping with string keys: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// plainScalars makes the scalars of the tree under n what JSON holds,
// before the tree is read as JSON: an unquoted date or time (YAML's
// timestamp, which would read back as 2024-01-01T00:00:00Z) is its text;
// a .nan or .inf, which no JSON number is, and an integer with a leading
// zero (0100), which YAML 1.1 and 1.2 read as different numbers, are
// refused at their node.
func plainScalars(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!timestamp":
			n.Tag = "!!str"
		case "!!float":
			if v := strings.ToLower(strings.TrimLeft(n.Value, "+-")); v == ".nan" || v == ".inf" {
				return &nodeError{node: n, msg: fmt.Sprintf("%s is not a number a JSON value holds", n.Value)}
			}
		case "!!int":
			// 0100 is octal 64 to the YAML 1.1 this reads, decimal 100 to
			// YAML 1.2 and to whoever reads the file: neither is guessed.
			if v := strings.TrimLeft(n.Value, "+-"); v[0] == '0' && strings.Trim(v, "0_") != "" && strings.Trim(v, "01234567_") == "" {
				return &nodeError{node: n, msg: fmt.Sprintf("%s has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as decimal: "+
					"write it without the zero, or as %s0o%s for octal", n.Value, n.Value[:len(n.Value)-len(v)], strings.TrimLeft(v, "0_"))}
			}
		}
	}
	for _, c := range n.Content {
		if err := plainScalars(c); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.Preset == "" {
		c.Preset = PresetDefault
	}
	if c.HostApprovalPrompt == "" {
		c.HostApprovalPrompt = HostPromptDefault
	}
	if c.Approvals.TTL == 0 {
		c.Approvals.TTL = Duration(ApprovalTTLDefault)
	}
	if c.Audit.SealInterval == 0 {
		c.Audit.SealInterval = Duration(SealIntervalDefault)
	}
	if cp := c.Audit.Checkpoint; cp != nil {
		if cp.Interval == 0 {
			cp.Interval = Duration(CheckpointIntervalDefault)
		}
		if cp.Origin == "" {
			cp.Origin = "orangerail/" + c.Service
		}
	}
	if c.Approvals.ApproverRole == "" {
		c.Approvals.ApproverRole = ApproverRoleDefault
	}
	if c.Approvals.AuditorRole == "" {
		c.Approvals.AuditorRole = AuditorRoleDefault
	}
	for _, a := range c.Actions {
		if a == nil {
			continue
		}
		a.Policy.approverRolesWritten = len(a.Policy.ApproverRoles) > 0
		if !a.Policy.approverRolesWritten {
			a.Policy.ApproverRoles = []string{c.Approvals.ApproverRole}
		}
	}
	if c.Approvals.FourEyes == nil {
		fourEyes := true
		c.Approvals.FourEyes = &fourEyes
	}
	c.Limits.MaxInputBytes = cmp.Or(c.Limits.MaxInputBytes, MaxInputBytesDefault)
	lock, statement := c.Limits.Timeouts()
	c.Limits.LockTimeout, c.Limits.StatementTimeout = (*Duration)(&lock), (*Duration)(&statement)
	h := &c.HTTP
	h.Listen = cmp.Or(h.Listen, HTTPListenDefault)
	if h.PublicURL == "" {
		h.PublicURL, _ = LoopbackURL(h.Listen)
	}
	// A body holds an input and its JSON-RPC envelope: left out, its
	// bound makes room for the largest input limits.max_input_bytes takes.
	h.MaxBodyBytes = cmp.Or(h.MaxBodyBytes, max(MaxBodyBytesDefault, int64(c.Limits.MaxInputBytes)+BodyEnvelopeBytes))
	r := &h.RateLimits
	r.ReadsPerMinute = cmp.Or(r.ReadsPerMinute, ReadsPerMinuteDefault)
	r.WritesPerMinute = cmp.Or(r.WritesPerMinute, WritesPerMinuteDefault)
	r.FailedAuthPerMinute = cmp.Or(r.FailedAuthPerMinute, FailedAuthPerMinuteDefault)
	r.Store = cmp.Or(r.Store, RateLimitStoreDefault)
	r.OnStoreError = cmp.Or(r.OnStoreError, OnStoreErrorDefault)
	r.FlushInterval = cmp.Or(r.FlushInterval, Duration(FlushIntervalDefault))
	for _, o := range c.Objects {
		if o.ReadAccess.Kind == "" {
			o.ReadAccess.Kind = ReadAccessDefault
		}
		if o.List.MaxLimit == 0 {
			o.List.MaxLimit = ListMaxLimitDefault
		}
	}
	for _, a := range c.Actions {
		if a.Policy.Approval == "" {
			a.Policy.Approval = ApprovalNone
		}
	}
	c.withHTTPDefaults()
	c.withSOAPDefaults() // soap (issue 14 item 6)
}

// ParseTranslationPrefix reads one of http.translation_prefixes: an IPv6
// prefix of a length RFC 6052 gives an IPv4-embedded address (32, 40, 48,
// 56, 64 or 96), with no bits past it.
func ParseTranslationPrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "":
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv6 prefix such as 2001:db8:64::/96", s)
	case !slices.Contains([]int{32, 40, 48, 56, 64, 96}, p.Bits()):
		return netip.Prefix{}, fmt.Errorf("%q is a /%d; a translator's prefix is a /32, /40, /48, /56, /64 or /96 (RFC 6052)", s, p.Bits())
	case p != p.Masked():
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its prefix length; write %s", s, p.Masked())
	}
	return p, nil
}

// ParseNetwork reads one of identity.allowed_networks: a CIDR such as
// 10.0.0.0/8 or 2001:db8::/32, whose address has no bits past its prefix
// (10.1.2.3/8 is refused: which network was meant is unclear).
func ParseNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its prefix length; write %s", s, p.Masked())
	}
	return p, nil
}
