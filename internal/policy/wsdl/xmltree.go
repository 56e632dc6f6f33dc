package wsdl

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds on one file. WSDL documents in the wild are well under a
// megabyte; the bounds are far above that and exist so that a hostile or
// broken file is refused with a clear error instead of exhausting memory.
const (
	maxFileBytes = 32 << 20 // bytes in one file
	maxDepth     = 256      // element nesting
	maxNodes     = 1 << 20  // elements across every file of a document
)

// node is one XML element with its namespace scope: encoding/xml resolves
// the prefixes of element and attribute names, but WSDL and XSD also put
// QNames in attribute values (type="tns:Foo"), which must be resolved
// against the declarations in scope where the attribute is written.
type node struct {
	name     xml.Name
	attrs    []xml.Attr
	ns       *nsScope // the namespace declarations in scope on it
	children []*node
	text     strings.Builder
}

// decoder builds node trees and counts the elements of every file it
// reads, so that the node bound holds across imports.
type decoder struct {
	nodes int
}

// parse reads one XML document into a tree.
func (dc *decoder) parse(data []byte) (*node, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrTooLarge, len(data), maxFileBytes)
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = charsetReader
	var (
		root  *node
		stack []*node
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return nil, fmt.Errorf("%w: elements nested deeper than %d", ErrTooLarge, maxDepth)
			}
			dc.nodes++
			if dc.nodes > maxNodes {
				return nil, fmt.Errorf("%w: more than %d elements", ErrTooLarge, maxNodes)
			}
			n := &node{name: t.Name, attrs: t.Attr}
			var parentNS *nsScope
			if len(stack) > 0 {
				parentNS = stack[len(stack)-1].ns
			}
			n.ns = scope(parentNS, t.Attr)
			switch {
			case len(stack) > 0:
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			case root != nil:
				return nil, fmt.Errorf("%w: more than one root element", ErrMalformed)
			default:
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: no root element", ErrMalformed)
	}
	return root, nil
}

// nsScope is the namespace declarations in force on an element: its own
// xmlns attributes (prefix, "" for the default, → namespace URI), over its
// parent's. Each element keeps only its own: copying the parent's map into
// every element that declares one made a 400 KB file of many prefixes,
// redeclared on each of many elements, hold gigabytes.
type nsScope struct {
	parent *nsScope
	own    map[string]string
}

// lookup returns the namespace prefix is bound to, the nearest
// declaration first.
func (s *nsScope) lookup(prefix string) (string, bool) {
	for ; s != nil; s = s.parent {
		if uri, ok := s.own[prefix]; ok {
			return uri, true
		}
	}
	return "", false
}

// scope returns the declarations in force on an element whose attributes
// are attrs, within parent's: parent itself when it declares none.
func scope(parent *nsScope, attrs []xml.Attr) *nsScope {
	var own map[string]string
	for _, a := range attrs {
		var prefix string
		switch {
		case a.Name.Space == "xmlns":
			prefix = a.Name.Local
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			prefix = ""
		default:
			continue
		}
		if own == nil {
			own = map[string]string{}
		}
		own[prefix] = a.Value
	}
	if own == nil {
		return parent
	}
	return &nsScope{parent: parent, own: own}
}

// charsetReader accepts the encodings besides UTF-8 that a WSDL
// generator might declare and that need no table: US-ASCII is UTF-8, and
// ISO-8859-1 maps each byte to the code point of the same value.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "us-ascii", "ascii", "utf8":
		return in, nil
	case "iso-8859-1", "latin1", "iso8859-1", "l1":
		raw, err := io.ReadAll(io.LimitReader(in, maxFileBytes+1))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, c := range raw {
			b.WriteRune(rune(c))
		}
		return strings.NewReader(b.String()), nil
	}
	return nil, fmt.Errorf("unsupported encoding %q (UTF-8, US-ASCII and ISO-8859-1 are read)", label)
}

// is reports whether the element is space:local.
func (n *node) is(space, local string) bool {
	return n.name.Space == space && n.name.Local == local
}

// attr returns an unqualified attribute's value.
func (n *node) attr(local string) string {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// hasAttr reports whether an unqualified attribute is present.
func (n *node) hasAttr(local string) bool {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return true
		}
	}
	return false
}

// attrNS returns a qualified attribute's value.
func (n *node) attrNS(space, local string) string {
	for _, a := range n.attrs {
		if a.Name.Space == space && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// child returns the first child named space:local, or nil.
func (n *node) child(space, local string) *node {
	for _, c := range n.children {
		if c.is(space, local) {
			return c
		}
	}
	return nil
}

// qname resolves a QName written in an attribute value against the
// declarations in scope on the element: "tns:Foo" by the tns prefix, an
// unprefixed name by the default namespace. ok is false when the prefix
// is not declared.
func (n *node) qname(v string) (xml.Name, bool) {
	v = strings.TrimSpace(v)
	prefix, local, found := strings.Cut(v, ":")
	if !found {
		space, _ := n.ns.lookup("")
		return xml.Name{Space: space, Local: v}, v != ""
	}
	if prefix == "xml" {
		return xml.Name{Space: "http://www.w3.org/XML/1998/namespace", Local: local}, true
	}
	space, ok := n.ns.lookup(prefix)
	return xml.Name{Space: space, Local: local}, ok && local != ""
}

// documentation returns the trimmed text of the element's documentation
// child in the given namespace (wsdl:documentation, or xsd:annotation's
// xsd:documentation), markup inside it read as text.
func (n *node) documentation(space string) string {
	d := n.child(space, "documentation")
	if d == nil {
		if a := n.child(xsdNS, "annotation"); a != nil && space == xsdNS {
			d = a.child(xsdNS, "documentation")
		}
	}
	if d == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*node)
	walk = func(x *node) {
		b.WriteString(x.text.String())
		for _, c := range x.children {
			walk(c)
		}
	}
	walk(d)
	return strings.Join(strings.Fields(b.String()), " ")
}
