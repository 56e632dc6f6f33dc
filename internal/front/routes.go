package front

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/orangerail/orangerail/internal/jcs"
)

// The handlers the front provides for its owners to mount: the
// protected-resource metadata, health and readiness.

// metadataPrefix is where RFC 9728 puts protected-resource metadata.
const metadataPrefix = "/.well-known/oauth-protected-resource"

// MetadataPath is the path of the protected-resource metadata of the
// resource at path resource (RFC 9728 section 3.1); the empty resource is
// the server's root.
func MetadataPath(resource string) string { return metadataPrefix + resource }

// Metadata serves the RFC 9728 protected-resource document of the resource
// at path resource, named by the configured public URL. Its authorization
// servers are identity.oidc.authorization_servers, else the issuer.
func (f *Front) Metadata(resource string) http.Handler { return f.metadata(resource, false) }

// MountMetadata mounts a protected-resource document at path: GET for
// any origin (public discovery data), and OPTIONS within the MCP
// endpoint's origin rules. A browser's MCP client fetches the document
// cross-origin with its MCP-Protocol-Version header, so it sends a
// preflight first; that preflight is answered as the endpoint's are
// (corsAnswered: 204 for an origin http.allowed_origins admits, 403 for
// another, none named where identity.refuse_browser_origins holds).
func (f *Front) MountMetadata(path string, metadata http.Handler) {
	f.Mount("GET "+path, metadata, Policy{})
	f.Mount("OPTIONS "+path, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// An OPTIONS that is no admitted preflight is told the methods.
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
	}), Policy{CheckOrigin: true})
}

// IssuerMetadata is Metadata naming the issuer alone as the authorization
// server: for a resource people reach with a token from the issuer itself
// (`orangerail login`, the desk's sign-in), whichever servers MCP clients
// are sent to.
func (f *Front) IssuerMetadata(resource string) http.Handler { return f.metadata(resource, true) }

func (f *Front) metadata(resource string, issuerOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		cfg := f.c.Ontology
		doc := map[string]any{
			"resource":                 f.origin + resource,
			"bearer_methods_supported": []string{"header"},
			"resource_name":            cfg.Service,
			"scopes_supported":         cfg.ScopeNames(),
		}
		if o := cfg.Identity.OIDC; o != nil {
			servers := o.AuthorizationServers
			if len(servers) == 0 || issuerOnly {
				servers = []string{o.Issuer}
			}
			doc["authorization_servers"] = servers
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Access-Control-Allow-Origin", "*") // public discovery data (RFC 9728 section 3.1)
		_ = json.NewEncoder(w).Encode(doc)
	})
}

// Healthz answers that the process serves.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// Readyz answers whether ready reports the server able to serve; why not
// goes to the host log.
func (f *Front) Readyz(ready func(ctx context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(r.Context()); err != nil {
			f.log.WarnContext(r.Context(), "not ready", "error", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}

// ToolCalls bills MCP requests: a POSTed tools/call by its tool's class,
// which toolClass tells from the tool's name and arguments (an unknown
// tool is a write; a tool that calls another, such as manage_resource,
// is billed as the tool it calls); any other method
// reads; a body that cannot be read as one request bills writes. Other
// HTTP methods bill nothing. The body is read as strictly as the MCP SDK
// reads it — member names match exactly and none may repeat — so that the
// tool billed is the tool run.
func ToolCalls(toolClass func(tool string, arguments map[string]any) Class) RateFunc {
	return func(r *http.Request, body []byte) Class {
		if r.Method != http.MethodPost {
			return ClassNone
		}
		v, err := jcs.Parse(body)
		msg, ok := v.(map[string]any)
		if err != nil || !ok {
			return ClassWrite
		}
		switch method, isString := msg["method"].(string); {
		case !isString:
			return ClassWrite
		case method != "tools/call":
			return ClassRead
		}
		params, _ := msg["params"].(map[string]any)
		name, _ := params["name"].(string)
		arguments, _ := params["arguments"].(map[string]any)
		return toolClass(name, arguments)
	}
}
