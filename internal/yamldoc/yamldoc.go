// Package yamldoc reads a file of one YAML document. yaml.Unmarshal reads
// the first document of a stream and ignores what follows a "---": a
// config's second document, or a description's, would vanish without a
// word. Every place that reads a file as YAML reads it here.
package yamldoc

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// ErrMoreDocuments is a file holding more than one YAML document.
var ErrMoreDocuments = errors.New(`the file holds more than one YAML document (a "---" starts another): put everything in one`)

// Decode returns data's one document as a node tree: Kind 0 for a file
// with no document (empty, or comments only). The parser's error, or
// ErrMoreDocuments, when data is not one YAML document; an empty document
// after it (a closing "---") is none.
func Decode(data []byte) (yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return yaml.Node{}, nil
		}
		return yaml.Node{}, err
	}
	for {
		var next yaml.Node
		switch err := dec.Decode(&next); {
		case errors.Is(err, io.EOF):
			return doc, nil
		case err != nil:
			return yaml.Node{}, err
		case !empty(&next):
			return yaml.Node{}, ErrMoreDocuments
		}
	}
}

// empty reports whether a document holds nothing: what a closing "---"
// with nothing after it reads as.
func empty(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return len(doc.Content) == 1 && n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}
