package ontology

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// This file holds the soap member of the execute union: an action that
// calls a SOAP operation an upstream serves, document/literal. It shares
// the upstreams, their credentials and the bounds of an http call
// (upstream.go); rpc/encoded is not supported.

// SOAPVersion is the SOAP version of an envelope.
type SOAPVersion string

// The SOAP versions.
const (
	SOAP11 SOAPVersion = "1.1"
	SOAP12 SOAPVersion = "1.2"
)

// SOAPVersions returns every SOAP version. The config schema's enum is
// this list; a test holds them equal.
func SOAPVersions() []SOAPVersion { return []SOAPVersion{SOAP11, SOAP12} }

// EnvelopeNamespace returns the namespace of v's envelope, Body and Fault.
func (v SOAPVersion) EnvelopeNamespace() string {
	if v == SOAP12 {
		return "http://www.w3.org/2003/05/soap-envelope"
	}
	return "http://schemas.xmlsoap.org/soap/envelope/"
}

// QName is an XML element's qualified name.
type QName struct {
	Namespace string `yaml:"namespace" json:"namespace"`
	Name      string `yaml:"name" json:"name"`
}

// SOAPExecute is an action's call of a SOAP operation (kind soap). Its
// json names are its definition hash's (internal/engine).
type SOAPExecute struct {
	// Upstream names one of the config's upstreams; its base URL, with
	// Path appended, is the endpoint.
	Upstream string `yaml:"upstream" json:"upstream"`
	// Path is appended to the upstream's base URL, literally: an
	// endpoint's path takes no parameters.
	Path string `yaml:"path" json:"path,omitempty"`
	// Version picks the envelope, its media type and how the action is
	// sent: 1.1 in the SOAPAction header, 1.2 as the media type's action.
	Version SOAPVersion `yaml:"version" json:"version"`
	// Action is the operation's SOAPAction (a URI; may be empty).
	Action string `yaml:"action" json:"action"`
	// Operation is the Body's element: document/literal names the
	// operation's wrapper element by its QName.
	Operation QName `yaml:"operation" json:"operation"`
	// Body is the operation element's children, in order: each item one
	// element, {Name: ":input_name" | "literal" | {list: ":input_name"} |
	// [children…]}, in the operation's namespace ({list: …} is an XML
	// Schema list type's element, SOAPTextList).
	Body []map[string]any `yaml:"body" json:"body,omitempty"`
	// Headers are HTTP headers, as an http call's.
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// Success lists the statuses that mean success. Defaults to any 2xx.
	Success []int `yaml:"success" json:"success,omitempty"`
	// Safe declares the operation read-only: a failure of it is never in
	// doubt, and an attempt sent and unanswered is made again. A SOAP
	// operation is otherwise a write.
	Safe        bool     `yaml:"safe" json:"safe"`
	MaxBytes    int64    `yaml:"max_bytes" json:"max_bytes"`
	Timeout     Duration `yaml:"timeout" json:"timeout"`
	Deadline    Duration `yaml:"deadline" json:"deadline"`
	MaxAttempts int      `yaml:"max_attempts" json:"max_attempts"`
	// Auth names the upstream's schemes the call presents, as an http
	// call's (HTTPExecute.Auth).
	Auth *[]string `yaml:"auth" json:"auth,omitempty"`
	// Scopes narrow the call's oauth2_client_credentials token, as an
	// http call's (HTTPExecute.Scopes): [] asks for no scope, and is
	// hashed apart from absent (omitzero).
	Scopes []string `yaml:"scopes" json:"scopes,omitzero"`

	// baseURL, upstream, presented, tokenScopes and elements are resolved
	// at load.
	baseURL     *url.URL
	upstream    *Upstream
	presented   []string
	tokenScopes []string
	elements    []SOAPElement
}

// Presented returns the names of the upstream's schemes the call
// presents, resolved at load (Auth).
func (s *SOAPExecute) Presented() []string { return slices.Clone(s.presented) }

// TokenScopes returns the scopes the call's token is requested with,
// resolved at load (Scopes); nil when the call requests its scheme's,
// empty (not nil) when it requests no scope.
func (s *SOAPExecute) TokenScopes() []string { return slices.Clone(s.tokenScopes) }

// SOAPElement is one element of a SOAP body template: its local name and
// either Value (a :name reference or a literal), written as Text says, or
// Children.
type SOAPElement struct {
	Name     string
	Value    string
	Text     SOAPText
	Children []SOAPElement
}

// SOAPText is how an element bound to a value writes it: XML Schema
// tells a repeated element (maxOccurs > 1) from one element of a list
// type, and both are a JSON array to the agent.
type SOAPText int

const (
	// SOAPTextElements writes the element once per value: an array
	// repeats it, absent or null leaves it out. Written {Name: value}.
	SOAPTextElements SOAPText = iota
	// SOAPTextList writes one element whose text is the array's items
	// joined by single spaces, an XML Schema list type's (xs:list): an
	// empty array is an empty element, absent or null leaves it out, and
	// an item that holds whitespace or is empty, which the upstream would
	// read as other items, is refused. Written {Name: {list: value}}.
	SOAPTextList
)

// UpstreamDecl returns the declaration of the upstream the call names,
// resolved at load.
func (s *SOAPExecute) UpstreamDecl() *Upstream { return s.upstream }

// Endpoint returns the URL the call is POSTed to, resolved at load; nil
// when the config was not loaded with Parse.
func (s *SOAPExecute) Endpoint() *url.URL {
	if s.baseURL == nil {
		return nil
	}
	u := *s.baseURL
	u.Path = strings.TrimSuffix(u.Path, "/") + s.Path
	u.RawPath = ""
	return &u
}

// Elements returns the body template, read at load.
func (s *SOAPExecute) Elements() []SOAPElement { return s.elements }

// Succeeded reports whether status means the call succeeded.
func (s *SOAPExecute) Succeeded(status int) bool { return succeeded(s.Success, status) }

// Limits returns the call's bounds.
func (s *SOAPExecute) Limits() UpstreamLimits {
	return UpstreamLimits{MaxBytes: s.MaxBytes, Timeout: s.Timeout, Deadline: s.Deadline, MaxAttempts: s.MaxAttempts}
}

// xmlName matches the element and attribute names a SOAP call's config
// may use: an XML NCName, ASCII letters, digits, '.', '-' and '_'.
var xmlName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]*$`)

// withSOAPDefaults fills a soap execute's bounds, as an http call's.
func (c *Config) withSOAPDefaults() {
	_, statement := c.Limits.Timeouts()
	for _, a := range c.Actions {
		if s := a.Execute.SOAP; s != nil {
			l := s.Limits()
			l.withDefaults(statement)
			s.MaxBytes, s.Timeout, s.Deadline, s.MaxAttempts = l.MaxBytes, l.Timeout, l.Deadline, l.MaxAttempts
		}
	}
}

// validateSOAPExecute checks a soap execute: its upstream, version and
// operation, every name its body and headers bind, and its bounds.
func (c *Config) validateSOAPExecute(s *SOAPExecute, path string, envs []string, properties []string, add func(path, format string, args ...any)) {
	ref := func(at, name string) {
		if !slices.Contains(properties, name) {
			add(at, "names %q, which is not a property of the action's input", name)
		}
	}
	if u, base := c.resolveUpstream(s.Upstream, path, envs, add); u != nil {
		s.baseURL, s.upstream = base, u
		s.presented = resolvePresented(u, s.Upstream, s.Auth, path, add)
		s.tokenScopes = resolveScopes(u, s.Upstream, s.presented, s.Scopes, path, add)
	}
	if s.Path != "" {
		if parts, err := ParsePath(s.Path); err != nil {
			add(path+".path", "%v", err)
		} else if slices.ContainsFunc(parts, func(p PathPart) bool { return p.Param != "" }) {
			add(path+".path", "an endpoint's path takes no parameters: bind the input in the body")
		}
	}
	if !slices.Contains(SOAPVersions(), s.Version) {
		add(path+".version", "is %q; it must be one of %v", s.Version, SOAPVersions())
	}
	if !httpguts.ValidHeaderFieldValue(s.Action) || strings.ContainsAny(s.Action, "\"\\") {
		add(path+".action", "holds characters a quoted SOAPAction cannot carry")
	}
	if ns, err := url.Parse(s.Operation.Namespace); err != nil || ns.Scheme == "" {
		add(path+".operation.namespace", "%q is not an absolute URI: document/literal names the operation's element in its namespace", s.Operation.Namespace)
	}
	if !xmlName.MatchString(s.Operation.Name) {
		add(path+".operation.name", "%q is not an XML element name (letters, digits, '.', '-', '_'; no prefix)", s.Operation.Name)
	}
	s.elements = soapElements(s.Body, path+".body", ref, add)
	validateHeaders(s.Headers, path+".headers", ref, add, "SOAPAction")
	if s.upstream != nil {
		s.upstream.refuseCredentialPlaces(s.Upstream, s.Headers, path+".headers", InHeader, add)
	}
	for i, st := range s.Success {
		if st < 100 || st > 599 {
			add(fmt.Sprintf("%s.success.%d", path, i), "%d is not an HTTP status", st)
		}
	}
	c.validateLimits(s.Limits(), path, add)
}

// soapElements reads a body template: each item one element, its name
// the item's one key, its value a :name reference, a literal, either of
// them as {list: …} (SOAPTextList), or a list of children.
func soapElements(items []map[string]any, path string, ref func(at, name string), add func(path, format string, args ...any)) []SOAPElement {
	var out []SOAPElement
	for i, item := range items {
		at := fmt.Sprintf("%s.%d", path, i)
		if len(item) != 1 {
			add(at, "names %d elements; write one element per item, so that their order is the list's", len(item))
			continue
		}
		for name, v := range item {
			at += "." + name
			if !xmlName.MatchString(name) {
				add(at, "%q is not an XML element name (letters, digits, '.', '-', '_'; no prefix)", name)
			}
			e := SOAPElement{Name: name}
			switch v := v.(type) {
			case string:
				if input, ok := InputRef(v); ok {
					ref(at, input)
				}
				e.Value = v
			case map[string]any:
				list, ok := v["list"].(string)
				if len(v) != 1 || !ok {
					add(at, "is not a list's value: write {list: \":input_name\"} (or {list: literal})")
					break
				}
				if input, ok := InputRef(list); ok {
					ref(at+".list", input)
				}
				e.Value, e.Text = list, SOAPTextList
			case []any:
				children := make([]map[string]any, 0, len(v))
				for j, c := range v {
					m, ok := c.(map[string]any)
					if !ok {
						add(fmt.Sprintf("%s.%d", at, j), "is not an element: write {Name: value}")
						continue
					}
					children = append(children, m)
				}
				e.Children = soapElements(children, at, ref, add)
			default:
				add(at, "is neither text (a :name reference or a literal), {list: text} nor a list of child elements")
			}
			out = append(out, e)
		}
	}
	return out
}
