// Package apispec reads an API description file of any format the policy
// compiler takes — OpenAPI 2.0, 3.0 or 3.1 (JSON or YAML) and WSDL 1.1 —
// telling them apart by their content, never by their file name.
package apispec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/policy/openapi"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

// MaxBytes bounds a description file: the largest real ones are about a
// megabyte.
const MaxBytes = 64 << 20

// File is a description read from disk.
type File struct {
	Doc *apidoc.Document
	// Name is the file's base name; SHA256 its bytes' digest, hex.
	Name, SHA256 string
}

// Read reads the description at path. The files its $refs or imports
// name are read from its directory, through an os.Root, so that neither
// a ../ nor a symbolic link reaches outside it; the network is never
// read.
func Read(path string) (*File, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes, more than any description needs", path, MaxBytes)
	}
	var doc *apidoc.Document
	if isXML(data) {
		doc, err = wsdl.ParseIn(data, name, root)
	} else {
		doc, err = openapi.Parse(data, name, root.FS())
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return &File{Doc: doc, Name: name, SHA256: hex.EncodeToString(sum[:])}, nil
}

// isXML reports whether data begins, after a byte-order mark and white
// space, with markup.
func isXML(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '<'
}
