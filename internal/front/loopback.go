package front

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/errcode"
)

// hostAndOriginAllowed applies a CheckOrigin route's DNS-rebinding and
// cross-site protection, or answers the request itself and reports false.
//
//   - Over a loopback connection the Host must name a loopback host: a
//     browser tricked by DNS rebinding sends the attacker's name. This is
//     the rule go-sdk's Streamable HTTP handler enforces (its localhost
//     protection, which stays on); the front answers it in its own words
//     first, so the two always agree and the client reads JSON-RPC.
//   - An Origin, when sent, must be one of http.allowed_origins or — only
//     when http.listen is a loopback address and the request came over
//     loopback — a loopback origin on any port: a page of this machine
//     calling a server only this machine reaches, which MCP clients and the
//     conformance suite send. A loopback origin to a server listening off
//     loopback is refused as any other unlisted origin.
//
// identity.refuse_browser_origins is not this check's: the resolver
// refuses any Origin after it, as it always has.
func (f *Front) hostAndOriginAllowed(w http.ResponseWriter, r *http.Request) bool {
	overLoopback := false
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		overLoopback = isLoopback(local.String())
	}
	if overLoopback && !isLoopback(r.Host) {
		f.refuse(w, r, refusal{status: http.StatusForbidden, code: errcode.MCPHostRefused,
			msg: "the Host header names no loopback host, though the request came over loopback"})
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || slices.Contains(f.http.AllowedOrigins, origin) || (f.loopback && overLoopback && isLoopbackOrigin(origin)) {
		return true
	}
	f.refuse(w, r, refusal{status: http.StatusForbidden, code: errcode.MCPOriginRefused, msg: "this origin may not call the server"})
	return false
}

// The CORS answer of an origin hostAndOriginAllowed admits: a browser
// client of a listed origin (or a loopback one, on a loopback server)
// sends its token and JSON only after a preflight, and reads an answer
// only when it names the origin.
const (
	corsMethods = "GET, POST, DELETE"
	// corsHeaders are the request headers a Streamable HTTP client sends
	// besides the ones a browser always may.
	corsHeaders = "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
	// corsExposed are the answer's headers a client reads: the session,
	// the challenge naming the resource's metadata, and when to retry.
	corsExposed = "Mcp-Session-Id, WWW-Authenticate, Retry-After"
	corsMaxAge  = "600"
)

// corsAnswered names a request's Origin, which hostAndOriginAllowed
// admitted, in every answer to it, and answers a preflight itself (before
// the bearer check: a browser sends no token with one) and reports true.
// Where identity.refuse_browser_origins refuses every Origin, it names
// none: no browser may call, and none is told it may.
func (f *Front) corsAnswered(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || f.c.Ontology.Identity.RefuseBrowserOrigins {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposed)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// isLoopback reports whether a host, with or without a port, is loopback:
// exactly "localhost", or an address in 127.0.0.0/8 or ::1. It reads a
// name as go-sdk's localhost protection reads a Host, so that the front
// accepts no Host the SDK would then refuse.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]") // no port
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isLoopbackOrigin reports whether an Origin header is an http or https
// origin of a loopback host, on any port.
func isLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return isLoopback(u.Host)
}
