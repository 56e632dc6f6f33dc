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
