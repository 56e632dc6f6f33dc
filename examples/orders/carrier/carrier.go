// Package carrier is the example's shipping upstream: a small carrier API
// that `make run` serves on loopback and the orders example's
// create_return_label action calls. It behaves like a real carrier where a
// caller can tell: a label costs one API key's account, a retry under the
// same Idempotency-Key gets the label the first request made (not a second
// one), and a parcel it cannot carry is refused. Its OpenAPI 3.1 document
// (openapi.json, served at /openapi.json) describes exactly what it serves.
package carrier

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Document is the API's OpenAPI 3.1 document.
//
//go:embed openapi.json
var Document []byte

// KeyHeader is the request header that carries the API key.
const KeyHeader = "X-Api-Key"

// IdempotencyHeader is the request header a client names a request by, so
// that its retries are told from a new request.
const IdempotencyHeader = "Idempotency-Key"

// Bounds of a label request, as the document states them.
const (
	MaxWeightGrams = 30000 // a parcel heavier than 30 kg goes as freight
	maxBodyBytes   = 16 << 10
	maxKeyLength   = 255
	maxReason      = 500
	maxOrderID     = 64
)

// Label is a prepaid return label.
type Label struct {
	ID             string    `json:"id"`
	TrackingNumber string    `json:"tracking_number"`
	LabelURL       string    `json:"label_url"`
	OrderID        string    `json:"order_id"`
	Reason         string    `json:"reason"`
	WeightGrams    int       `json:"weight_grams"`
	CreatedAt      time.Time `json:"created_at"`
}

// labelRequest is the body of POST /labels.
type labelRequest struct {
	OrderID     string          `json:"order_id"`
	Reason      string          `json:"reason"`
	WeightGrams json.RawMessage `json:"weight_grams"`
}

// Problem is an error answer (RFC 9457).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Carrier serves the API for one account, the holder of its API key.
type Carrier struct {
	key []byte

	mu     sync.Mutex
	labels map[string]*Label // by id
	// keyed holds each Idempotency-Key's first request (its body's
	// digest) and the label it made.
	keyed map[string]keyedRequest
}

type keyedRequest struct {
	digest [sha256.Size]byte
	label  *Label
}

// New returns a carrier whose one account's API key is apiKey. An empty
// key would let an unauthenticated request in, so it is refused.
func New(apiKey string) (*Carrier, error) {
	if apiKey == "" {
		return nil, errors.New("carrier: an API key is required")
	}
	return &Carrier{key: []byte(apiKey), labels: map[string]*Label{}, keyed: map[string]keyedRequest{}}, nil
}

// Handler serves the API: GET /openapi.json without a key; POST /labels,
// GET /labels/{id} and GET /labels/{id}/pdf with it.
func (c *Carrier) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(Document)
	})
	mux.Handle("POST /labels", c.authenticated(c.createLabel))
	mux.Handle("GET /labels/{id}", c.authenticated(c.getLabel))
	mux.Handle("GET /labels/{id}/pdf", c.authenticated(c.labelPDF))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "No such resource", "")
	})
	return mux
}

// authenticated refuses a request without the account's API key.
func (c *Carrier) authenticated(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(KeyHeader)), c.key) != 1 {
			w.Header().Set("WWW-Authenticate", `ApiKey header="`+KeyHeader+`"`)
			problem(w, http.StatusUnauthorized, "unauthenticated", "A valid API key is required", "send the account's key in "+KeyHeader)
			return
		}
		next(w, r)
	})
}

func (c *Carrier) createLabel(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "The body must be application/json", "")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, "too_large", "The body is too large", fmt.Sprintf("at most %d bytes", maxBodyBytes))
		return
	}
	key := r.Header.Get(IdempotencyHeader)
	if len(key) > maxKeyLength {
		problem(w, http.StatusBadRequest, "idempotency_key_invalid", "The Idempotency-Key is too long", fmt.Sprintf("at most %d characters", maxKeyLength))
		return
	}
	var req labelRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		problem(w, http.StatusBadRequest, "malformed", "The body is not a label request", "send {order_id, reason, weight_grams}")
		return
	}
	weight, detail := checkRequest(req)
	if detail != "" {
		problem(w, http.StatusUnprocessableEntity, "invalid_request", "The label cannot be made", detail)
		return
	}

	// The digest covers what the label is made of, so that a retry of the
	// same request is recognised however its JSON was laid out.
	canonical, err := json.Marshal([]any{req.OrderID, req.Reason, weight})
	if err != nil {
		problem(w, http.StatusInternalServerError, "internal", "The label could not be made", "")
		return
	}
	digest := sha256.Sum256(canonical)
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != "" {
		if prior, ok := c.keyed[key]; ok {
			if prior.digest != digest {
				// draft-ietf-httpapi-idempotency-key-header §2.7: a key
				// reused for another request is refused, not replayed.
				problem(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "The Idempotency-Key was used for another request", "use a new key for a new request")
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeLabel(w, prior.label)
			return
		}
	}
	label := &Label{ID: "lbl_" + randomHex(8), TrackingNumber: "1ZOR" + strings.ToUpper(randomHex(7)), OrderID: req.OrderID,
		Reason: req.Reason, WeightGrams: weight, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	label.LabelURL = "http://" + r.Host + "/labels/" + label.ID + "/pdf"
	if r.TLS != nil {
		label.LabelURL = "https://" + strings.TrimPrefix(label.LabelURL, "http://")
	}
	c.labels[label.ID] = label
	if key != "" {
		c.keyed[key] = keyedRequest{digest: digest, label: label}
	}
	writeLabel(w, label)
}

// checkRequest returns the weight in grams, or what is wrong with the
// request.
func checkRequest(req labelRequest) (int, string) {
	switch {
	case req.OrderID == "" || len(req.OrderID) > maxOrderID:
		return 0, fmt.Sprintf("order_id must be 1 to %d characters", maxOrderID)
	case req.Reason == "" || len(req.Reason) > maxReason:
		return 0, fmt.Sprintf("reason must be 1 to %d characters", maxReason)
	}
	var weight int
	if err := json.Unmarshal(req.WeightGrams, &weight); err != nil || weight < 1 || weight > MaxWeightGrams {
		return 0, fmt.Sprintf("weight_grams must be a whole number from 1 to %d", MaxWeightGrams)
	}
	return weight, ""
}

func (c *Carrier) getLabel(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	label, ok := c.labels[r.PathValue("id")]
	c.mu.Unlock()
	if !ok {
		problem(w, http.StatusNotFound, "not_found", "No such label", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(label)
}

// labelPDF serves the label to print: a one-page PDF naming its tracking
// number.
func (c *Carrier) labelPDF(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	label, ok := c.labels[r.PathValue("id")]
	c.mu.Unlock()
	if !ok {
		problem(w, http.StatusNotFound, "not_found", "No such label", "")
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	_, _ = w.Write(labelPDF(label))
}

// labelPDF writes a minimal PDF 1.4 document: one page, the tracking
// number and the order in Helvetica.
func labelPDF(l *Label) []byte {
	text := fmt.Sprintf("BT /F1 18 Tf 36 120 Td (RETURN %s) Tj 0 -28 Td (order %s) Tj ET", l.TrackingNumber, pdfEscape(l.OrderID))
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 288 180] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(text), text),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// pdfEscape escapes text for a PDF literal string, and keeps it printable
// ASCII.
func pdfEscape(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s))
}

func writeLabel(w http.ResponseWriter, l *Label) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/labels/"+l.ID)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(l)
}

func problem(w http.ResponseWriter, status int, kind, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: "https://carrier.example/problems/" + kind, Title: title, Status: status, Detail: detail})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
