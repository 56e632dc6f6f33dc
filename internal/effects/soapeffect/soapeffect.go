// Package soapeffect is the effect of an action declared execute: {soap: …}:
// a SOAP 1.1 or 1.2 operation, document/literal, its body's elements bound
// from the call's input by name. It sends through httpeffect's Caller —
// the upstream's credentials, bounds, attempts and their records, and the
// rules of when to attempt again are an http call's — and differs only in
// the request it builds and how it reads the answer.
//
// No idempotency key is ever sent: WSDL declares nothing like one, so a
// key would be a header no SOAP service was built to honour (spec 001). A
// call is attempted again on what tells it the request was not taken: 429,
// 502, 503, 504, or a request never sent; an operation declared safe: true
// (read-only) also after a request sent and unanswered. Otherwise such an
// attempt ends the call, and its outcome is unknown.
package soapeffect

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// Bounds of reading an answer: how deep its elements may nest, and how
// much of a fault's code and string an audit record's error keeps.
const (
	maxDepth   = 64
	faultBytes = 512
)

// Effect calls one action's SOAP operation. It is safe for concurrent use.
type Effect struct {
	spec     *ontology.SOAPExecute
	endpoint string
	caller   *httpeffect.Caller
	plan     *httpeffect.Plan
}

// New makes the effect of an action declared execute: {soap: …}; it is an
// engine.EffectFactory.
func New(_ string, a *ontology.Action) (engine.Effect, error) {
	spec := a.Execute.SOAP
	if a.Execute.Kind() != ontology.ExecuteSOAP || spec == nil {
		return nil, fmt.Errorf("soapeffect: the action's execute is of kind %q, not soap", a.Execute.Kind())
	}
	endpoint := spec.Endpoint()
	if endpoint == nil {
		return nil, errors.New("soapeffect: the upstream has no base URL (load the config with ontology.Parse)")
	}
	caller, err := httpeffect.NewCaller(spec.Upstream, spec.UpstreamDecl(), spec.Presented(), spec.TokenScopes())
	if err != nil {
		return nil, err
	}
	x := &Effect{spec: spec, endpoint: endpoint.String(), caller: caller}
	x.plan = &httpeffect.Plan{
		Describe:  fmt.Sprintf("SOAP %s %s {%s}%s", spec.Version, spec.Upstream, spec.Operation.Namespace, spec.Operation.Name),
		Method:    http.MethodPost,
		Limits:    spec.Limits(),
		ReadOnly:  spec.Safe,
		Retry:     true,
		RetrySent: spec.Safe,
		Succeeded: spec.Succeeded,
		// A fault comes with 500 (1.1), or 400 or 500 (1.2): its body
		// says which side failed.
		ReadFailures: true,
		Read:         x.read,
	}
	return x, nil
}

// Transactional reports false: the call is outside every transaction.
func (*Effect) Transactional() bool { return false }

// Run calls the operation and returns {"status": n, "body": {element: …}}:
// the Body's first element as JSON (see toJSON), or null for none.
func (x *Effect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	req, err := httpeffect.Place(call, x.plan, x.build)
	if err != nil {
		return engine.EffectResult{}, err
	}
	return x.caller.Do(ctx, call, x.plan, req)
}

// build makes the request: the envelope, every value in it escaped by
// encoding/xml, and the version's media type and action.
func (x *Effect) build(input map[string]json.RawMessage) (*httpeffect.Request, error) {
	header := http.Header{}
	for k, tmpl := range x.spec.Headers {
		if err := httpeffect.AddHeader(header, k, tmpl, input); err != nil {
			return nil, err
		}
	}
	switch x.spec.Version {
	case ontology.SOAP12:
		ct := "application/soap+xml; charset=utf-8"
		if x.spec.Action != "" {
			ct += `; action="` + x.spec.Action + `"`
		}
		header.Set("Content-Type", ct)
		header.Set("Accept", "application/soap+xml, text/xml;q=0.5")
	default:
		header.Set("Content-Type", "text/xml; charset=utf-8")
		// Set as spelled, not canonicalized to Soapaction: header names
		// are case-insensitive, but some SOAP stacks match this one
		// exactly.
		header["SOAPAction"] = []string{`"` + x.spec.Action + `"`}
		header.Set("Accept", "text/xml")
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	// The envelope's and the operation's namespaces are bound to fixed
	// prefixes; the names after them are the config's, checked at load
	// to be XML names.
	envelope := xml.StartElement{Name: xml.Name{Local: "soap:Envelope"}, Attr: []xml.Attr{
		{Name: xml.Name{Local: "xmlns:soap"}, Value: x.spec.Version.EnvelopeNamespace()},
		{Name: xml.Name{Local: "xmlns:m"}, Value: x.spec.Operation.Namespace},
	}}
	body := xml.StartElement{Name: xml.Name{Local: "soap:Body"}}
	operation := xml.StartElement{Name: xml.Name{Local: "m:" + x.spec.Operation.Name}}
	for _, t := range []xml.StartElement{envelope, body, operation} {
		if err := enc.EncodeToken(t); err != nil {
			return nil, err
		}
	}
	if err := encodeElements(enc, x.spec.Elements(), input); err != nil {
		return nil, err
	}
	for _, t := range []xml.StartElement{operation, body, envelope} {
		if err := enc.EncodeToken(t.End()); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return &httpeffect.Request{URL: x.endpoint, Header: header, Body: buf.Bytes()}, nil
}

// encodeElements writes a body template's elements: one with children
// always; one with a value once per value (an array repeats it; absent or
// null leaves it out), or, a list type's, once with its items joined
// (listText); the value as escaped text, never markup.
func encodeElements(enc *xml.Encoder, elements []ontology.SOAPElement, input map[string]json.RawMessage) error {
	for _, e := range elements {
		start := xml.StartElement{Name: xml.Name{Local: "m:" + e.Name}}
		if e.Children != nil {
			if err := enc.EncodeToken(start); err != nil {
				return err
			}
			if err := encodeElements(enc, e.Children, input); err != nil {
				return err
			}
			if err := enc.EncodeToken(start.End()); err != nil {
				return err
			}
			continue
		}
		values, err := httpeffect.Values(e.Value, input)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		if e.Text == ontology.SOAPTextList {
			if values, err = listText(e, values, input); err != nil {
				return err
			}
		}
		for _, v := range values {
			if i := strings.IndexFunc(v, func(r rune) bool { return !xmlChar(r) }); i >= 0 {
				// encoding/xml would write U+FFFD in its place: refuse
				// rather than send a value the caller did not give.
				return fmt.Errorf("%s: the value holds a character XML cannot carry (at byte %d)", e.Name, i)
			}
			if err := enc.EncodeToken(start); err != nil {
				return err
			}
			if err := enc.EncodeToken(xml.CharData(v)); err != nil {
				return err
			}
			if err := enc.EncodeToken(start.End()); err != nil {
				return err
			}
		}
	}
	return nil
}

// listText is the text of a list type's element (SOAPTextList) bound to
// values: its items joined by single spaces, one text — an empty array's
// the empty text, absent or null none. An item that is empty or holds
// whitespace is refused: the upstream splits the text on whitespace
// (XSD 1.0 Part 2, 4.3.6: a list's whiteSpace is collapse), so it would
// read other items than the agent gave.
func listText(e ontology.SOAPElement, values []string, input map[string]json.RawMessage) ([]string, error) {
	if name, ok := ontology.InputRef(e.Value); ok {
		if raw := bytes.TrimSpace(input[name]); len(raw) == 0 || string(raw) == "null" {
			return nil, nil
		}
	} else {
		return values, nil // a literal is the list's text as written
	}
	for i, v := range values {
		if v == "" || strings.ContainsAny(v, " \t\n\r") {
			return nil, fmt.Errorf("%s: the list's item %d is empty or holds whitespace, which would be read as other items than those given", e.Name, i)
		}
	}
	return []string{strings.Join(values, " ")}, nil
}

// xmlChar reports whether r is a character XML 1.0 can carry (§2.2).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || (r >= 0x20 && r <= 0xD7FF) ||
		(r >= 0xE000 && r <= 0xFFFD && r != utf8.RuneError) || (r >= 0x10000 && r <= 0x10FFFF)
}

// read makes an answer the call's result, or the failure its fault
// states.
func (x *Effect) read(status int, _ http.Header, body []byte) httpeffect.Answer {
	first, err := envelopeBody(body, x.spec.Version.EnvelopeNamespace())
	if err != nil {
		return httpeffect.Answer{Unreadable: err}
	}
	if first != nil && first.name.Space == x.spec.Version.EnvelopeNamespace() && first.name.Local == "Fault" {
		diagnostic, err := fault(first, x.spec.Version)
		return httpeffect.Answer{Diagnostic: diagnostic, Err: err}
	}
	out := map[string]any{"status": status, "body": nil}
	if first != nil {
		out["body"] = map[string]any{first.name.Local: toJSON(first)}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return httpeffect.Answer{Unreadable: err}
	}
	return httpeffect.Answer{Result: data}
}

// fault classifies a Fault: the client's (1.1 Client, 1.2 Sender — and a
// version or header the service did not take) is upstream_rejected, the
// server's (Server, Receiver) and any other upstream_error. Its code and
// string are for operators: they go to the error an audit record and the
// host log keep, capped, never to the agent.
func fault(f *node, version ontology.SOAPVersion) (engine.Diagnostic, error) {
	var code, text string
	if version == ontology.SOAP12 {
		if c := f.child("Code"); c != nil {
			code = c.child("Value").textOf()
		}
		if r := f.child("Reason"); r != nil {
			text = r.child("Text").textOf()
		}
	} else {
		code, text = f.child("faultcode").textOf(), f.child("faultstring").textOf()
	}
	code = strings.TrimSpace(code)
	local := code[strings.LastIndexByte(code, ':')+1:]
	diagnostic := engine.DiagnosticUpstreamError
	switch base, _, _ := strings.Cut(local, "."); base {
	case "Client", "Sender", "VersionMismatch", "MustUnderstand", "DataEncodingUnknown":
		diagnostic = engine.DiagnosticUpstreamRejected
	}
	return diagnostic, &faultError{code: code, text: text}
}

// faultError is a Fault's code and string, kept whole and cut (capText)
// as they are written: the credentials scrubbed from them (Scrubbed) are
// found whole, where a cut first would leave a credential's beginning.
type faultError struct{ code, text string }

func (f *faultError) Error() string {
	return fmt.Sprintf("SOAP fault %q: %q", capText(f.code), capText(f.text))
}

// Scrubbed is f with its code and string scrubbed.
func (f *faultError) Scrubbed(scrub func(string) string) error {
	return &faultError{code: scrub(f.code), text: scrub(f.text)}
}

// capText cuts s to faultBytes, on a character boundary.
func capText(s string) string {
	if len(s) <= faultBytes {
		return s
	}
	s = s[:faultBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// node is an element of an answer.
type node struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*node
	text     strings.Builder
}

// child returns n's first child element of local name name, or nil.
func (n *node) child(name string) *node {
	if n == nil {
		return nil
	}
	for _, c := range n.children {
		if c.name.Local == name {
			return c
		}
	}
	return nil
}

// textOf returns n's text; "" for nil.
func (n *node) textOf() string {
	if n == nil {
		return ""
	}
	return n.text.String()
}

// envelopeBody parses an envelope of the namespace ns and returns its
// Body's first element, nil when the Body is empty.
func envelopeBody(data []byte, ns string) (*node, error) {
	root, err := parse(data)
	if err != nil {
		return nil, err
	}
	if root.name.Space != ns || root.name.Local != "Envelope" {
		return nil, fmt.Errorf("the answer is not an envelope of %s", ns)
	}
	for _, c := range root.children {
		if c.name.Space == ns && c.name.Local == "Body" {
			if len(c.children) == 0 {
				return nil, nil
			}
			return c.children[0], nil
		}
	}
	return nil, errors.New("the envelope has no Body")
}

// parse reads one XML document's element tree. The document is bounded
// already (max_bytes); a DTD is refused, so no entity but XML's own is
// ever defined, and nesting is bounded so that no answer runs deep.
func parse(data []byte) (*node, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var root *node
	var stack []*node
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, errors.New("the answer declares a DTD or another directive, which is refused")
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return nil, fmt.Errorf("the answer nests elements deeper than %d", maxDepth)
			}
			if root != nil && len(stack) == 0 {
				return nil, errors.New("the answer has more than one root element")
			}
			// encoding/xml reads an attribute written twice (as one name,
			// or as two prefixes of one namespace) where XML forbids it:
			// refused, as a JSON answer naming a member twice is.
			if len(t.Attr) > 1 {
				seen := make(map[xml.Name]bool, len(t.Attr))
				for _, a := range t.Attr {
					if seen[a.Name] {
						return nil, fmt.Errorf("the answer's element %s repeats the attribute %s", t.Name.Local, a.Name.Local)
					}
					seen[a.Name] = true
				}
			}
			n := &node{name: t.Name, attrs: t.Attr}
			if len(stack) == 0 {
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			} else if len(bytes.TrimSpace(t)) > 0 {
				return nil, errors.New("the answer has text outside its root element")
			}
		}
	}
	if root == nil {
		return nil, errors.New("the answer holds no element")
	}
	return root, nil
}

// xsiNamespace is XML Schema instance's, whose nil attribute marks an
// element without a value.
const xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"

// toJSON maps an element to JSON: an element with neither attributes nor
// children is its text, a string (xsi:nil="true" is null); any other is an
// object — each attribute under "@" and its local name, each child under
// its local name (a value when it appears once, an array in document order
// when more than once), and text beside them, when not blank, under
// "#text". Namespaces are dropped: names are local names, but for an
// attribute of a namespace whose local name another attribute of the
// element shares, which is keyed "@{namespace}name" so that neither
// overwrites the other. Namespace declarations are not attributes.
func toJSON(n *node) any {
	var attrs []xml.Attr
	for _, a := range n.attrs {
		switch {
		case a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns"):
		case a.Name.Space == xsiNamespace && a.Name.Local == "nil":
			if v := strings.TrimSpace(a.Value); v == "true" || v == "1" {
				return nil
			}
		default:
			attrs = append(attrs, a)
		}
	}
	if len(attrs) == 0 && len(n.children) == 0 {
		return n.text.String()
	}
	out := make(map[string]any, len(attrs)+len(n.children)+1)
	locals := map[string]int{}
	for _, a := range attrs {
		locals[a.Name.Local]++
	}
	for _, a := range attrs {
		key := "@" + a.Name.Local
		if locals[a.Name.Local] > 1 && a.Name.Space != "" {
			key = "@{" + a.Name.Space + "}" + a.Name.Local
		}
		out[key] = a.Value
	}
	counts := map[string]int{}
	for _, c := range n.children {
		counts[c.name.Local]++
	}
	for _, c := range n.children {
		if counts[c.name.Local] > 1 {
			list, _ := out[c.name.Local].([]any)
			out[c.name.Local] = append(list, toJSON(c))
		} else {
			out[c.name.Local] = toJSON(c)
		}
	}
	if text := strings.TrimSpace(n.text.String()); text != "" {
		out["#text"] = n.text.String()
	}
	return out
}
