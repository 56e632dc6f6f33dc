package policy_test

import (
	"testing"
)

// TestAnOptionalBodyLeftOutIsNotSent: a requestBody not required may be
// left out (OAS 3 "Request Body Object"): the request then has no body.
// The compiled action sent the JSON null, with Content-Type
// application/json, which the operation's schema (an object) refuses.
func TestAnOptionalBodyLeftOutIsNotSent(t *testing.T) {
	spec := keyed + `paths:
  /jobs/{id}/cancel:
    post:
      operationId: cancelJob
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                reason: {type: string}
      responses: {"200": {description: ok}}
`
	rec, call := serveSpec(t, spec, map[string]string{"cancelJob": "the key is ours"})
	if body := call("cancelJob", `{"id": "j1"}`); body["status"] != "executed" {
		t.Fatalf("cancelJob: %v", body)
	}
	if len(rec.reqs) != 1 {
		t.Fatalf("the upstream got %v", rec.reqs)
	}
	if r := rec.reqs[0]; r.Body != "" {
		t.Fatalf("the upstream was sent the body %q (Content-Type %q) for a call that left the optional body out", r.Body, r.ContentType)
	}
}
