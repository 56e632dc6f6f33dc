package api

import (
	_ "embed"
	"net/http"
)

// Document is the API's OpenAPI 3.1 document; a test holds it to the
// handlers: every route, every status they answer, and every body
// validated against its schema.
//
//go:embed openapi.json
var Document []byte

func serveDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(Document)
}
