package policy_test

import "testing"

// TestEveryAssertionOfTheBodyIsKept: the keywords the loader did not read
// were dropped from the input without a word: patternProperties beside
// additionalProperties: false made the input refuse the x- members the
// API allows, and uniqueItems, multipleOf, maxProperties and not let
// through what the API refuses.
func TestEveryAssertionOfTheBodyIsKept(t *testing.T) {
	spec := keyed + `paths:
  /orders:
    post:
      operationId: createOrder
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              patternProperties:
                "^x-": {type: string}
              properties:
                skus: {type: array, items: {type: string}, uniqueItems: true}
                amount: {type: number, multipleOf: 0.01}
                labels: {type: object, maxProperties: 2}
                note: {type: string, not: {enum: [""]}}
      responses: {"201": {description: ok}}
`
	v := inputOf(t, spec, "createOrder", map[string]string{"createOrder": "the key is ours"})
	if err := validate(t, v, `{"body": {"x-trace": "t1", "skus": ["a"]}}`); err != nil {
		t.Errorf("an x- member patternProperties allows is refused: %v", err)
	}
	for _, refused := range []string{
		`{"body": {"skus": ["a", "a"]}}`,
		`{"body": {"amount": 1.234}}`,
		`{"body": {"labels": {"a": 1, "b": 2, "c": 3}}}`,
		`{"body": {"note": ""}}`,
	} {
		if err := validate(t, v, refused); err == nil {
			t.Errorf("%s, which the API refuses, is accepted", refused)
		}
	}
}
