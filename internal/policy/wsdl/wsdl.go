// Package wsdl reads a WSDL 1.1 document into an apidoc.Document: one
// Operation per portType operation that a SOAP 1.1 or SOAP 1.2 binding
// serves, its input message read as the request Body, its output message
// as the "200" Response and each fault as a "500" Response, the XML Schema
// types they use read as JSON Schemas.
//
// # Sources
//
// Every Source and Problem names the place it was read from as a QName in
// James Clark's notation, "{namespace}local", the namespace being the
// targetNamespace of the definitions or schema that declares the
// component. WSDL and XML Schema keep separate symbol spaces (a message
// and an element may share a name), so each component's local part says
// its kind:
//
//	{ns}message:Name                      a message
//	{ns}message:Name/part:in0             one of its parts
//	{ns}portType:Name/operation:op        an abstract operation
//	{ns}binding:Name                      a binding
//	{ns}service:Name/port:Port            a port (a Server's Source)
//	{ns}element:Name                      a global element
//	{ns}complexType:Name, {ns}simpleType:Name   a named type
//	…/sequence/element:child              a local element, below its parent,
//	                                      through each model group
//	                                      (sequence, choice, all,
//	                                      complexContent/extension …)
//
// An Operation's Source is the binding's QName and the operation's name,
// "{ns}Binding/operation", as apidoc documents it.
//
// # Choosing a binding
//
// When several SOAP bindings serve the same portType operation the SOAP
// 1.1 one is read (it is the most widely served) and the others, with any
// HTTP GET or POST binding offering an operation of the same name, are
// listed in SOAPBinding.Others. HTTP bindings make no operations. A
// binding over a transport other than HTTP, and a soap:header block, are
// Problems: neither can be called through the Body alone. Servers are the
// SOAP ports' addresses, each URL once.
//
// # Schemas
//
// A named type or a global element is read once and shared: every use is
// the same *apidoc.Schema, its Ref its Source, so a recursive type is a
// cycle of pointers. A local element's maxOccurs above one makes an array;
// minOccurs="0" leaves it out of Required; nillable adds "null" to its
// Types, or, for a shared schema that cannot be changed for one use,
// makes it AnyOf the shared schema and {"type": "null"}. An extension's
// properties follow its base's. A choice's elements are all optional. A
// soapenc:Array restriction is an array of its wsdl:arrayType. XML
// attributes have no place in the JSON form and are not read.
//
// # Files
//
// Parse reads only the bytes it is given. Load also reads the files that
// wsdl:import, xsd:import and xsd:include name by a relative location
// beside the document, inside its directory and a few levels deep; a
// location that is a URL, an absolute path or outside the directory is a
// Problem and is never fetched.
package wsdl

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// Namespaces the loader reads.
const (
	wsdlNS    = "http://schemas.xmlsoap.org/wsdl/"
	wsdl20NS  = "http://www.w3.org/ns/wsdl"
	soapNS    = "http://schemas.xmlsoap.org/wsdl/soap/"
	soap12NS  = "http://schemas.xmlsoap.org/wsdl/soap12/"
	httpNS    = "http://schemas.xmlsoap.org/wsdl/http/"
	xsdNS     = "http://www.w3.org/2001/XMLSchema"
	soapencNS = "http://schemas.xmlsoap.org/soap/encoding/"
)

// Errors Parse and Load return, for the caller to classify with errors.Is.
var (
	// ErrMalformed is a file that is not well-formed XML.
	ErrMalformed = errors.New("wsdl: malformed XML")
	// ErrNotWSDL is well-formed XML that is not a WSDL 1.1 definitions
	// document.
	ErrNotWSDL = errors.New("wsdl: not a WSDL 1.1 document")
	// ErrTooLarge is a document beyond the loader's bounds on size,
	// nesting, element count or schema size.
	ErrTooLarge = errors.New("wsdl: document too large")
)

// Bounds on imports.
const (
	maxImportDepth = 8  // chains of imports
	maxFiles       = 64 // files read for one document, itself included
)

// Load reads the WSDL 1.1 document at path, and the files it imports by a
// relative location inside path's directory.
func Load(file string) (*apidoc.Document, error) {
	dir, base := filepath.Split(file)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("wsdl: %w", err)
	}
	defer root.Close()
	data, err := readRooted(root, base)
	if err != nil {
		return nil, fmt.Errorf("wsdl: %s: %w", file, err)
	}
	return parse(data, file, root, base)
}

// ParseIn reads a WSDL 1.1 document from data, named name inside root,
// whose relative imports it reads from root (never outside it).
func ParseIn(data []byte, name string, root *os.Root) (*apidoc.Document, error) {
	return parse(data, name, root, name)
}

// Parse reads a WSDL 1.1 document from data; name is the file name to
// report it by. It reads nothing else: each import with a location is a
// Problem.
func Parse(data []byte, name string) (*apidoc.Document, error) {
	return parse(data, name, nil, "")
}

func parse(data []byte, name string, root *os.Root, rel string) (*apidoc.Document, error) {
	l := newLoader(root)
	tree, err := l.dec.parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !tree.is(wsdlNS, "definitions") {
		if tree.name.Space == wsdl20NS {
			return nil, fmt.Errorf("%s: %w: WSDL 2.0 (%s) is not read", name, ErrNotWSDL, wsdl20NS)
		}
		return nil, fmt.Errorf("%s: %w: the root element is {%s}%s, not {%s}definitions",
			name, ErrNotWSDL, tree.name.Space, tree.name.Local, wsdlNS)
	}
	if rel != "" {
		l.seen[rel] = true
	}
	l.files = 1
	l.tns = tree.attr("targetNamespace")
	doc := &apidoc.Document{
		Format:  apidoc.WSDL,
		Version: "1.1",
		Title:   tree.attr("name"),
		Schemes: map[string]*apidoc.Scheme{},
	}
	l.doc = doc
	l.collectDefinitions(tree, rel, 0)
	l.build()
	if l.err != nil {
		return nil, fmt.Errorf("%s: %w", name, l.err)
	}
	return doc, nil
}

// def is a named WSDL or XSD component and the targetNamespace it was
// declared in.
type def struct {
	n   *node
	tns string
	src string
}

// loader holds one document's components while it is read.
type loader struct {
	dec   decoder
	root  *os.Root // nil for Parse: no file is read
	seen  map[string]bool
	files int
	tns   string
	doc   *apidoc.Document
	err   error // a bound exceeded while building; fatal

	messages, portTypes, bindings map[xml.Name]def
	bindingOrder                  []def
	services                      []def

	types, elements, groups map[xml.Name]def
	typeMemo, elemMemo      map[xml.Name]*apidoc.Schema
	filling                 map[*apidoc.Schema]bool
	groupActive             map[xml.Name]bool
	work                    int
	nest                    int
}

func newLoader(root *os.Root) *loader {
	return &loader{
		root:        root,
		seen:        map[string]bool{},
		messages:    map[xml.Name]def{},
		portTypes:   map[xml.Name]def{},
		bindings:    map[xml.Name]def{},
		types:       map[xml.Name]def{},
		elements:    map[xml.Name]def{},
		groups:      map[xml.Name]def{},
		typeMemo:    map[xml.Name]*apidoc.Schema{},
		elemMemo:    map[xml.Name]*apidoc.Schema{},
		filling:     map[*apidoc.Schema]bool{},
		groupActive: map[xml.Name]bool{},
	}
}

func (l *loader) problem(src, format string, args ...any) {
	l.doc.Problems = append(l.doc.Problems, apidoc.Problem{Source: src, Message: fmt.Sprintf(format, args...)})
}

// qsrc is a component's source: {ns}kind:name.
func qsrc(ns, kind, name string) string {
	return "{" + ns + "}" + kind + ":" + name
}

// collectDefinitions registers the components of a definitions element,
// reading its imports. file is its path inside the root ("" for Parse).
func (l *loader) collectDefinitions(d *node, file string, depth int) {
	tns := d.attr("targetNamespace")
	register := func(m map[xml.Name]def, kind string, c *node) (def, bool) {
		name := c.attr("name")
		src := qsrc(tns, kind, name)
		if name == "" {
			l.problem(src, "a %s with no name is ignored", kind)
			return def{}, false
		}
		key := xml.Name{Space: tns, Local: name}
		if _, dup := m[key]; dup {
			l.problem(src, "%s %q is declared twice; the first is read", kind, name)
			return def{}, false
		}
		x := def{n: c, tns: tns, src: src}
		m[key] = x
		return x, true
	}
	for _, c := range d.children {
		if c.name.Space != wsdlNS {
			continue
		}
		switch c.name.Local {
		case "import":
			src := qsrc(tns, "import", c.attr("namespace"))
			sub, subFile := l.readImport(c.attr("location"), file, depth, src)
			if sub == nil {
				continue
			}
			switch {
			case sub.is(wsdlNS, "definitions"):
				l.collectDefinitions(sub, subFile, depth+1)
			case sub.is(xsdNS, "schema"):
				l.collectSchema(sub, subFile, depth+1, "")
			default:
				l.problem(src, "%s is neither WSDL definitions nor an XML Schema", subFile)
			}
		case "types":
			for _, s := range c.children {
				if s.is(xsdNS, "schema") {
					l.collectSchema(s, file, depth, "")
				}
			}
		case "message":
			register(l.messages, "message", c)
		case "portType":
			register(l.portTypes, "portType", c)
		case "binding":
			if b, ok := register(l.bindings, "binding", c); ok {
				l.bindingOrder = append(l.bindingOrder, b)
			}
		case "service":
			l.services = append(l.services, def{n: c, tns: tns, src: qsrc(tns, "service", c.attr("name"))})
		}
	}
}

// collectSchema registers a schema's named types, elements and groups.
// chameleon is the includer's namespace for an included schema that
// declares none.
func (l *loader) collectSchema(s *node, file string, depth int, chameleon string) {
	tns := s.attr("targetNamespace")
	if tns == "" {
		tns = chameleon
	}
	for _, c := range s.children {
		if c.name.Space != xsdNS {
			continue
		}
		var m map[xml.Name]def
		switch c.name.Local {
		case "import", "include", "redefine":
			loc := c.attr("schemaLocation")
			if loc == "" {
				continue // the namespace is declared elsewhere in the document
			}
			src := qsrc(tns, c.name.Local, loc)
			sub, subFile := l.readImport(loc, file, depth, src)
			if sub == nil {
				continue
			}
			if !sub.is(xsdNS, "schema") {
				l.problem(src, "%s is not an XML Schema", subFile)
				continue
			}
			inherit := ""
			if c.name.Local != "import" {
				inherit = tns
			}
			l.collectSchema(sub, subFile, depth+1, inherit)
			continue
		case "complexType", "simpleType":
			m = l.types
		case "element":
			m = l.elements
		case "group":
			m = l.groups
		default:
			continue
		}
		name := c.attr("name")
		if name == "" {
			continue
		}
		key := xml.Name{Space: tns, Local: name}
		src := qsrc(tns, c.name.Local, name)
		if _, dup := m[key]; dup {
			l.problem(src, "%s %q is declared twice; the first is read", c.name.Local, name)
			continue
		}
		m[key] = def{n: c, tns: tns, src: src}
	}
}

// readImport reads the file a relative location names, beside the file
// that names it, and returns its tree and its path inside the root; nil
// (with a Problem at src) when the location is remote, absolute, outside
// the directory, already read, too deep or unreadable.
func (l *loader) readImport(loc, from string, depth int, src string) (*node, string) {
	loc = strings.TrimSpace(loc)
	if loc == "" {
		l.problem(src, "the import names no location")
		return nil, ""
	}
	if u, err := url.Parse(loc); err != nil || u.Scheme != "" || u.Host != "" {
		l.problem(src, "the import's location %q is not a relative path; remote and absolute locations are not fetched", loc)
		return nil, ""
	}
	if path.IsAbs(loc) || filepath.IsAbs(loc) || strings.ContainsRune(loc, '\\') {
		l.problem(src, "the import's location %q is an absolute path; only files beside the document are read", loc)
		return nil, ""
	}
	rel := path.Clean(path.Join(path.Dir(from), loc))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		l.problem(src, "the import's location %q is outside the document's directory", loc)
		return nil, ""
	}
	if l.root == nil {
		l.problem(src, "the import %q is not read: Parse reads no files (Load reads imports beside the document)", loc)
		return nil, ""
	}
	if l.seen[rel] {
		return nil, "" // read already: its components are registered
	}
	if depth+1 > maxImportDepth {
		l.problem(src, "the import %q is not read: imports nest deeper than %d", loc, maxImportDepth)
		return nil, ""
	}
	if l.files >= maxFiles {
		l.problem(src, "the import %q is not read: a document reads at most %d files", loc, maxFiles)
		return nil, ""
	}
	l.seen[rel] = true
	l.files++
	data, err := readRooted(l.root, rel)
	if err != nil {
		l.problem(src, "the import %q could not be read: %v", loc, err)
		return nil, ""
	}
	tree, err := l.dec.parse(data)
	if err != nil {
		l.problem(src, "the import %q could not be read: %v", loc, err)
		return nil, ""
	}
	return tree, rel
}

// readRooted reads a file inside root, refusing one beyond maxFileBytes.
func readRooted(root *os.Root, rel string) ([]byte, error) {
	// Judged before it is opened: opening a FIFO waits for a writer,
	// which never comes; a device never ends.
	if info, err := root.Stat(rel); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxFileBytes)
	}
	return data, nil
}
