package wsdl

import (
	"encoding/xml"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// bindingKind is the protocol a binding speaks.
type bindingKind int

const (
	kindUnknown bindingKind = iota
	kindSOAP11
	kindSOAP12
	kindHTTP
)

// soapVersion is the SOAPBinding.Version of a SOAP binding kind.
func (k bindingKind) soapVersion() string {
	if k == kindSOAP12 {
		return "1.2"
	}
	return "1.1"
}

// mediaType is the Content-Type a SOAP binding kind sends.
func (k bindingKind) mediaType() string {
	if k == kindSOAP12 {
		return "application/soap+xml"
	}
	return "text/xml"
}

// soapSpace is the namespace of the binding kind's extension elements.
func (k bindingKind) soapSpace() string {
	if k == kindSOAP12 {
		return soap12NS
	}
	return soapNS
}

// The transports a SOAP binding may name for SOAP over HTTP.
const (
	soapHTTPTransport   = "http://schemas.xmlsoap.org/soap/http"
	soap12HTTPTransport = "http://www.w3.org/2003/05/soap/bindings/HTTP/"
)

// binding is one binding, classified, with the port that serves it.
type binding struct {
	def
	name     string
	kind     bindingKind
	portType xml.Name
	pt       *node
	style    string // the binding's default style
	port     string
	address  string
}

// boundOp is one operation of a binding and the portType operation it
// binds.
type boundOp struct {
	b   *binding
	op  *node // the binding's operation
	pt  *node // the portType's operation
	key string
}

// port is where a binding is served.
type port struct {
	name, address string
}

// build makes the Document's servers and operations from the collected
// components.
func (l *loader) build() {
	ports := l.readServices()
	var (
		groups = map[string][]*boundOp{}
		httpBy = map[string][]string{} // operation name → HTTP bindings offering it
		order  []*boundOp
	)
	for _, d := range l.bindingOrder {
		b := l.classify(d, ports)
		if b == nil {
			continue
		}
		for _, op := range d.n.children {
			if !op.is(wsdlNS, "operation") {
				continue
			}
			name := op.attr("name")
			if b.kind == kindHTTP {
				if !contains(httpBy[name], b.name) {
					httpBy[name] = append(httpBy[name], b.name)
				}
				continue
			}
			pt := l.portTypeOperation(b, op)
			if pt == nil {
				continue
			}
			inputName := ""
			if in := op.child(wsdlNS, "input"); in != nil {
				inputName = in.attr("name")
			}
			bo := &boundOp{b: b, op: op, pt: pt, key: "{" + b.portType.Space + "}" + b.portType.Local + "\x00" + name + "\x00" + inputName}
			groups[bo.key] = append(groups[bo.key], bo)
			order = append(order, bo)
		}
	}
	for _, bo := range order {
		group := groups[bo.key]
		if chosen(group) != bo {
			continue
		}
		var others []string
		for _, o := range group {
			if o != bo && !contains(others, o.b.name) {
				others = append(others, o.b.name)
			}
		}
		for _, h := range httpBy[bo.op.attr("name")] {
			if !contains(others, h) {
				others = append(others, h)
			}
		}
		l.doc.Operations = append(l.doc.Operations, l.operation(bo, others))
		if l.err != nil {
			return
		}
	}
}

// chosen is the operation of a group that is read: the first SOAP 1.1
// binding's, else the first one's.
func chosen(group []*boundOp) *boundOp {
	for _, bo := range group {
		if bo.b.kind == kindSOAP11 {
			return bo
		}
	}
	return group[0]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readServices sets the Document's Title and Servers from its services
// and returns where each binding is served: the first port that names it.
func (l *loader) readServices() map[xml.Name]port {
	ports := map[xml.Name]port{}
	seenURL := map[string]bool{}
	if len(l.services) > 0 && l.services[0].n.attr("name") != "" {
		l.doc.Title = l.services[0].n.attr("name")
	}
	for _, sv := range l.services {
		for _, p := range sv.n.children {
			if !p.is(wsdlNS, "port") {
				continue
			}
			name := p.attr("name")
			src := sv.src + "/port:" + name
			ref, ok := p.qname(p.attr("binding"))
			if !ok {
				l.problem(src, "the port's binding %q has an undeclared prefix", p.attr("binding"))
				continue
			}
			ref = l.lenient(l.bindings, ref)
			var address string
			var soapKind bindingKind
			for _, a := range p.children {
				if a.name.Local != "address" {
					continue
				}
				switch a.name.Space {
				case soapNS:
					soapKind = kindSOAP11
				case soap12NS:
					soapKind = kindSOAP12
				case httpNS:
				default:
					continue
				}
				address = strings.TrimSpace(a.attr("location"))
			}
			if _, done := ports[ref]; !done {
				ports[ref] = port{name: name, address: address}
			}
			if soapKind != kindUnknown && address != "" && !seenURL[address] {
				seenURL[address] = true
				l.doc.Servers = append(l.doc.Servers, apidoc.Server{
					URL:         address,
					Description: "port " + name + " (SOAP " + soapKind.soapVersion() + ")",
					Source:      src,
				})
			}
		}
	}
	return ports
}

// lenient returns ref, or, when ref is unprefixed and names nothing in m,
// the same local name in the document's targetNamespace: generators that
// write references without a prefix mean their own namespace.
func (l *loader) lenient(m map[xml.Name]def, ref xml.Name) xml.Name {
	if _, ok := m[ref]; ok {
		return ref
	}
	alt := xml.Name{Space: l.tns, Local: ref.Local}
	if _, ok := m[alt]; ok && ref.Space == "" {
		return alt
	}
	return ref
}

// classify reads a binding's protocol and portType; nil (with a Problem)
// for one that cannot be called.
func (l *loader) classify(d def, ports map[xml.Name]port) *binding {
	b := &binding{def: d, name: d.n.attr("name")}
	for _, c := range d.n.children {
		switch {
		case c.is(soapNS, "binding"), c.is(soap12NS, "binding"):
			b.kind = kindSOAP11
			if c.name.Space == soap12NS {
				b.kind = kindSOAP12
			}
			b.style = c.attr("style")
			switch t := c.attr("transport"); t {
			case soapHTTPTransport, soap12HTTPTransport:
			case "":
				l.problem(d.src, "the SOAP binding names no transport; SOAP over HTTP is assumed")
			default:
				l.problem(d.src, "the SOAP binding's transport %q is not HTTP: its operations are not read", t)
				return nil
			}
		case c.is(httpNS, "binding"):
			b.kind = kindHTTP
		}
	}
	if b.kind == kindUnknown {
		l.problem(d.src, "the binding is neither SOAP 1.1, SOAP 1.2 nor HTTP: its operations are not read")
		return nil
	}
	ref, ok := d.n.qname(d.n.attr("type"))
	if !ok {
		l.problem(d.src, "the binding's portType %q has an undeclared prefix", d.n.attr("type"))
		return nil
	}
	ref = l.lenient(l.portTypes, ref)
	pt, found := l.portTypes[ref]
	if !found {
		l.problem(d.src, "the binding's portType {%s}%s is not declared", ref.Space, ref.Local)
		return nil
	}
	b.portType, b.pt = ref, pt.n
	key := xml.Name{Space: d.tns, Local: b.name}
	if p, ok := ports[key]; ok {
		b.port, b.address = p.name, p.address
	} else if b.kind != kindHTTP {
		l.problem(d.src, "no port serves the binding: its operations have no address")
	}
	return b
}

// portTypeOperation finds the portType operation a binding operation
// binds: by name, and by input name when the name is overloaded.
func (l *loader) portTypeOperation(b *binding, op *node) *node {
	name := op.attr("name")
	var inputName string
	if in := op.child(wsdlNS, "input"); in != nil {
		inputName = in.attr("name")
	}
	var found []*node
	for _, c := range b.pt.children {
		if c.is(wsdlNS, "operation") && c.attr("name") == name {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		l.problem(b.src+"/"+name, "the portType {%s}%s declares no operation %q", b.portType.Space, b.portType.Local, name)
		return nil
	case 1:
		return found[0]
	}
	for _, c := range found {
		if in := c.child(wsdlNS, "input"); in != nil && in.attr("name") == inputName {
			return c
		}
	}
	return found[0]
}

// operation makes the apidoc.Operation of a chosen binding operation.
func (l *loader) operation(bo *boundOp, others []string) *apidoc.Operation {
	b, name := bo.b, bo.op.attr("name")
	opSrc := "{" + b.tns + "}" + b.name + "/" + name
	sp := b.kind.soapSpace()
	soapOp := bo.op.child(sp, "operation")
	style := b.style
	var action string
	if soapOp != nil {
		if s := soapOp.attr("style"); s != "" {
			style = s
		}
		action = soapOp.attr("soapAction")
	}
	if style == "" {
		style = "document"
	}
	if style != "document" && style != "rpc" {
		l.problem(opSrc, "the style %q is neither document nor rpc; document is assumed", style)
		style = "document"
	}
	o := &apidoc.Operation{
		ID:     name,
		Source: opSrc,
		SOAP: &apidoc.SOAPBinding{
			Version: b.kind.soapVersion(),
			Style:   style,
			Use:     "literal",
			Action:  action,
			Binding: b.name,
			Port:    b.port,
			Address: b.address,
			Others:  others,
		},
	}
	doc := bo.pt.documentation(wsdlNS)
	if doc == "" {
		doc = bo.op.documentation(wsdlNS)
	}
	o.Description = doc
	o.Summary = summary(doc)
	mt := b.kind.mediaType()
	for _, dir := range []string{"input", "output"} {
		io := bo.op.child(wsdlNS, dir)
		if io == nil {
			continue
		}
		for _, h := range io.children {
			if h.is(sp, "header") {
				l.problem(opSrc, "the %s's SOAP header (message %s, part %s) is not read: apidoc has no place for a header block",
					dir, h.attr("message"), h.attr("part"))
			}
		}
	}

	if in := bo.pt.child(wsdlNS, "input"); in != nil {
		body := soapBody(bo.op.child(wsdlNS, "input"), sp)
		if body != nil && body.attr("use") != "" {
			o.SOAP.Use = body.attr("use")
		}
		m := l.messageSchema(in, body, style, name, opSrc, true)
		if m != nil {
			o.Body = &apidoc.Body{MediaType: mt, MediaTypes: []string{mt}, Required: true, Schema: m.schema, Source: m.src}
			o.SOAP.Namespace, o.SOAP.Element = m.ns, m.element
		}
	} else {
		l.problem(opSrc, "the operation has no input: only request-response and one-way operations are called")
	}
	if out := bo.pt.child(wsdlNS, "output"); out != nil {
		body := soapBody(bo.op.child(wsdlNS, "output"), sp)
		if m := l.messageSchema(out, body, style, name+"Response", opSrc, false); m != nil {
			o.Responses = append(o.Responses, &apidoc.Response{Status: "200", MediaType: mt, Schema: m.schema, Source: m.src})
		}
	}
	for _, f := range bo.pt.children {
		if !f.is(wsdlNS, "fault") {
			continue
		}
		r := &apidoc.Response{Status: "500", Description: f.attr("name"), MediaType: mt, Source: opSrc}
		if m := l.messageSchema(f, nil, "document", f.attr("name"), opSrc, false); m != nil {
			r.Schema, r.Source = m.schema, m.src
		}
		o.Responses = append(o.Responses, r)
	}
	return o
}

// summary is the first sentence of an operation's documentation.
func summary(doc string) string {
	if i := strings.Index(doc, ". "); i >= 0 {
		return doc[:i+1]
	}
	return doc
}

// soapBody returns the soap:body (or soap12:body) of a binding
// operation's input or output.
func soapBody(io *node, space string) *node {
	if io == nil {
		return nil
	}
	return io.child(space, "body")
}

// message is a message read as the SOAP Body's content.
type message struct {
	schema      *apidoc.Schema
	src         string
	ns, element string // the Body child's QName
}

// messageSchema reads the message an input, output or fault names. In
// document style the Body holds the single part's element; in rpc style
// it holds a wrapper named for the operation (wrapper) in soap:body's
// namespace, with one child per part. sent is set for the input, whose
// Body a call writes: its document-style part must name its element.
func (l *loader) messageSchema(ref, body *node, style, wrapper, opSrc string, sent bool) *message {
	q, ok := ref.qname(ref.attr("message"))
	if !ok {
		l.problem(opSrc, "the message %q has an undeclared prefix", ref.attr("message"))
		return nil
	}
	q = l.lenient(l.messages, q)
	d, found := l.messages[q]
	if !found {
		l.problem(opSrc, "message {%s}%s is not declared", q.Space, q.Local)
		return nil
	}
	var only []string
	if body != nil && body.hasAttr("parts") {
		only = strings.Fields(body.attr("parts"))
	}
	var parts []*node
	for _, p := range d.n.children {
		if p.is(wsdlNS, "part") && (only == nil || contains(only, p.attr("name"))) {
			parts = append(parts, p)
		}
	}
	m := &message{src: d.src}
	if style == "rpc" {
		m.ns = l.tns
		if body != nil && body.attr("namespace") != "" {
			m.ns = body.attr("namespace")
		}
		m.element = wrapper
		m.schema = &apidoc.Schema{Source: d.src, Types: []string{"object"}}
		for _, p := range parts {
			name := p.attr("name")
			m.schema.Properties = append(m.schema.Properties, apidoc.Property{Name: name, Schema: l.partSchema(p, d.src+"/part:"+name)})
			m.schema.Required = append(m.schema.Required, name)
		}
		return m
	}
	switch len(parts) {
	case 0:
		l.problem(d.src, "the message names no part: the SOAP Body is empty")
		m.schema = &apidoc.Schema{Source: d.src, Types: []string{"object"}}
		return m
	case 1:
		p := parts[0]
		psrc := d.src + "/part:" + p.attr("name")
		if e := p.attr("element"); e != "" {
			if eq, ok := p.qname(e); ok {
				eq = l.lenientElement(eq)
				m.ns, m.element = eq.Space, eq.Local
			}
		} else if sent {
			// The Body's child is the part's element; a part by type names
			// none (WS-I Basic Profile R2204), and a call would send a Body
			// with no element the service reads. (A fault's or an output's
			// is only read.)
			l.problem(d.src, "the document-style part %q is given by type, not element (WS-I Basic Profile R2204): the SOAP Body a call sends has no element to name", p.attr("name"))
		}
		m.schema = l.partSchema(p, psrc)
		return m
	}
	l.problem(d.src, "the message has %d body parts; a document-style Body holds one (WS-I Basic Profile): each is read as a property", len(parts))
	m.schema = &apidoc.Schema{Source: d.src, Types: []string{"object"}}
	for _, p := range parts {
		name := p.attr("name")
		if e := p.attr("element"); e != "" {
			if eq, ok := p.qname(e); ok {
				name = eq.Local
			}
		}
		m.schema.Properties = append(m.schema.Properties, apidoc.Property{Name: name, Schema: l.partSchema(p, d.src+"/part:"+p.attr("name"))})
		m.schema.Required = append(m.schema.Required, name)
	}
	return m
}

// lenientElement is lenient for elements: an unprefixed element
// reference that names nothing means the document's namespace.
func (l *loader) lenientElement(q xml.Name) xml.Name {
	return l.lenient(l.elements, q)
}

// partSchema reads a part: its element's schema or its type's.
func (l *loader) partSchema(p *node, src string) *apidoc.Schema {
	if e := p.attr("element"); e != "" {
		q, ok := p.qname(e)
		if !ok {
			l.problem(src, "the element %q has an undeclared prefix", e)
			return &apidoc.Schema{Source: src}
		}
		return l.elementSchema(l.lenientElement(q), src)
	}
	if t := p.attr("type"); t != "" {
		q, ok := p.qname(t)
		if !ok {
			l.problem(src, "the type %q has an undeclared prefix", t)
			return &apidoc.Schema{Source: src}
		}
		return l.typeSchema(l.lenient(l.types, q), src)
	}
	l.problem(src, "the part names neither an element nor a type")
	return &apidoc.Schema{Source: src}
}
