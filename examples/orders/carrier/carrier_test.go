package carrier_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/examples/orders/carrier"
)

const apiKey = "test-key-5f2b"

// served runs the carrier over real HTTP and returns a function that
// makes a request and checks its answer against the OpenAPI document: the
// route and status must be documented, and the body must fit the schema
// the document gives them.
func served(t *testing.T) func(method, path, key, idemKey, body string) (int, http.Header, []byte) {
	t.Helper()
	c, err := carrier.New(apiKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	doc := document(t)
	return func(method, path, key, idemKey, body string) (int, http.Header, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set(carrier.KeyHeader, key)
		}
		if idemKey != "" {
			req.Header.Set(carrier.IdempotencyHeader, idemKey)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		doc.check(t, method, path, resp, b)
		return resp.StatusCode, resp.Header, b
	}
}

type openapi struct {
	paths    map[string]any
	compiler *jsonschema.Compiler
}

const documentURL = "https://carrier.test/openapi.json"

func document(t *testing.T) *openapi {
	t.Helper()
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(carrier.Document, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("the document: %v %q", err, doc.OpenAPI)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(carrier.Document))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(documentURL, raw); err != nil {
		t.Fatal(err)
	}
	return &openapi{paths: doc.Paths, compiler: c}
}

// route names the document's path template a request path falls under.
func route(path string) string {
	switch parts := strings.Split(strings.Trim(path, "/"), "/"); {
	case len(parts) == 2 && parts[0] == "labels":
		return "/labels/{id}"
	case len(parts) == 3 && parts[0] == "labels" && parts[2] == "pdf":
		return "/labels/{id}/pdf"
	}
	return path
}

func (o *openapi) check(t *testing.T, method, path string, resp *http.Response, body []byte) {
	t.Helper()
	tmpl := route(path)
	op, _ := o.paths[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if op == nil {
		t.Fatalf("the document has no %s %s", method, tmpl)
	}
	status := strconv.Itoa(resp.StatusCode)
	answer, _ := op["responses"].(map[string]any)[status].(map[string]any)
	if answer == nil {
		t.Fatalf("%s %s answered %s, which the document does not name: %s", method, path, status, body)
	}
	location := "#/paths/" + strings.ReplaceAll(tmpl, "/", "~1") + "/" + strings.ToLower(method) + "/responses/" + status
	if ref, ok := answer["$ref"].(string); ok {
		location = ref
		name := strings.TrimPrefix(ref, "#/components/responses/")
		var doc struct {
			Components struct {
				Responses map[string]map[string]any `json:"responses"`
			} `json:"components"`
		}
		if err := json.Unmarshal(carrier.Document, &doc); err != nil {
			t.Fatal(err)
		}
		answer = doc.Components.Responses[name]
	}
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	content, _ := answer["content"].(map[string]any)
	if _, ok := content[mediaType]; !ok {
		t.Fatalf("%s %s %s: Content-Type %q is not documented", method, path, status, mediaType)
	}
	if !strings.HasSuffix(mediaType, "json") {
		return
	}
	schema, err := o.compiler.Compile(documentURL + location + "/content/" + strings.ReplaceAll(mediaType, "/", "~1") + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, body)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("%s %s %s does not fit the document: %v\n%s", method, path, status, err, body)
	}
}

func label(t *testing.T, b []byte) carrier.Label {
	t.Helper()
	var l carrier.Label
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

const request = `{"order_id": "o-1003", "reason": "arrived damaged", "weight_grams": 1200}`

// TestIdempotencyKey: a request repeated under its Idempotency-Key gets
// the first label again, not a second one; the same key for another
// request is refused; without a key, each request is a label of its own.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	call := served(t)
	status, h, b := call("POST", "/labels", apiKey, "key-1", request)
	first := label(t, b)
	if status != http.StatusCreated || h.Get("Idempotent-Replayed") != "" || first.OrderID != "o-1003" || first.WeightGrams != 1200 ||
		first.Reason != "arrived damaged" || h.Get("Location") != "/labels/"+first.ID || !strings.HasSuffix(first.LabelURL, "/labels/"+first.ID+"/pdf") {
		t.Fatalf("first: %d %v %s", status, h, b)
	}
	// The same request, laid out otherwise: a retry, answered with the
	// label the first one made.
	status, h, b = call("POST", "/labels", apiKey, "key-1", `{"weight_grams":1200,"reason":"arrived damaged","order_id":"o-1003"}`)
	if again := label(t, b); status != http.StatusCreated || again != first || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v %s, first %+v", status, h, b, first)
	}
	status, _, b = call("POST", "/labels", apiKey, "key-1", `{"order_id": "o-1003", "reason": "arrived damaged", "weight_grams": 1300}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(b), "idempotency_key_reused") {
		t.Fatalf("the key reused for another request: %d %s", status, b)
	}
	_, _, b = call("POST", "/labels", apiKey, "key-2", request)
	_, _, b2 := call("POST", "/labels", apiKey, "", request)
	_, _, b3 := call("POST", "/labels", apiKey, "", request)
	ids := map[string]bool{first.ID: true, label(t, b).ID: true, label(t, b2).ID: true, label(t, b3).ID: true}
	if len(ids) != 4 {
		t.Fatalf("another key, and no key twice, made %d labels beside the first: %v", len(ids)-1, ids)
	}
	status, _, b = call("GET", "/labels/"+first.ID, apiKey, "", "")
	if status != http.StatusOK || label(t, b) != first {
		t.Fatalf("get: %d %s", status, b)
	}
	status, h, b = call("GET", "/labels/"+first.ID+"/pdf", apiKey, "", "")
	if status != http.StatusOK || h.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(b, []byte("%PDF-1.4\n")) ||
		!bytes.Contains(b, []byte(first.TrackingNumber)) || !bytes.HasSuffix(b, []byte("%%EOF\n")) {
		t.Fatalf("pdf: %d %v %q", status, h, b)
	}
	if status, _, _ = call("GET", "/labels/lbl_0000000000000000", apiKey, "", ""); status != http.StatusNotFound {
		t.Fatalf("an unknown label: %d", status)
	}
}

// TestBadWeight: a weight the carrier cannot carry, or that is not a whole
// number of grams, is refused with 422 and makes no label.
func TestBadWeight(t *testing.T) {
	t.Parallel()
	call := served(t)
	for _, weight := range []string{"0", "-5", "30001", "1200.5", `"1200"`, "null", "1e9"} {
		body := `{"order_id": "o-1003", "reason": "damaged", "weight_grams": ` + weight + `}`
		status, _, b := call("POST", "/labels", apiKey, "k-"+weight, body)
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(b), "weight_grams must be a whole number from 1 to 30000") {
			t.Errorf("weight %s: %d %s", weight, status, b)
		}
		// The key was not spent on a refusal: a good request under it
		// makes a label.
		if status, _, _ := call("POST", "/labels", apiKey, "k-"+weight, request); status != http.StatusCreated {
			t.Errorf("after weight %s: %d", weight, status)
		}
	}
	if status, _, b := call("POST", "/labels", apiKey, "", `{"order_id": "o-1003", "reason": "damaged"}`); status != http.StatusUnprocessableEntity {
		t.Errorf("no weight: %d %s", status, b)
	}
	if status, _, b := call("POST", "/labels", apiKey, "", `{"order_id": "o-1003", "reason": "damaged", "weight_grams": 10, "x": 1}`); status != http.StatusBadRequest {
		t.Errorf("an unknown member: %d %s", status, b)
	}
	if status, _, b := call("POST", "/labels", apiKey, "", `{"order_id": "o-1003"`); status != http.StatusBadRequest {
		t.Errorf("broken JSON: %d %s", status, b)
	}
	if status, _, b := call("POST", "/labels", apiKey, strings.Repeat("k", 256), request); status != http.StatusBadRequest {
		t.Errorf("an over-long key: %d %s", status, b)
	}
}

// TestAuthRefusal: every label route needs the account's key; a missing or
// wrong one is 401 and makes nothing. The document alone is public.
func TestAuthRefusal(t *testing.T) {
	t.Parallel()
	call := served(t)
	_, _, b := call("POST", "/labels", apiKey, "", request)
	made := label(t, b)
	for _, key := range []string{"", "wrong", apiKey + "x", strings.ToUpper(apiKey)} {
		for _, r := range [][2]string{{"POST", "/labels"}, {"GET", "/labels/" + made.ID}, {"GET", "/labels/" + made.ID + "/pdf"}} {
			body := ""
			if r[0] == "POST" {
				body = request
			}
			status, h, b := call(r[0], r[1], key, "k", body)
			if status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), carrier.KeyHeader) || bytes.Contains(b, []byte(made.ID)) {
				t.Errorf("%s %s with key %q: %d %s", r[0], r[1], key, status, b)
			}
		}
	}
	// A refused request held its key: with the right one, "k" is new.
	if status, h, _ := call("POST", "/labels", apiKey, "k", request); status != http.StatusCreated || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after refusals: %d %v", status, h)
	}
	status, _, b := call("GET", "/openapi.json", "", "", "")
	if status != http.StatusOK || !bytes.Equal(b, carrier.Document) {
		t.Fatalf("the document: %d", status)
	}
	if _, err := carrier.New(""); err == nil {
		t.Fatal("a carrier without a key was made")
	}
}
