package app

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployProbesAreServed: the probes of deploy/kubernetes/deployment.yaml
// ask paths the server's routes serve — liveness answers 200 whatever the
// issuer, readiness answers as /readyz does (here 503: the test's issuer
// does not answer), neither is a 404 nor asks for a token.
func TestDeployProbesAreServed(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
		} `yaml:"httpGet"`
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	h, err := serveExample(t, "")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if live := get(c.LivenessProbe.HTTPGet.Path); live.Code != http.StatusOK || live.Body.String() != "ok\n" {
		t.Errorf("liveness GET %q: %d %q, want 200 ok", c.LivenessProbe.HTTPGet.Path, live.Code, live.Body)
	}
	if ready := get(c.ReadinessProbe.HTTPGet.Path); ready.Code != http.StatusServiceUnavailable || ready.Body.String() != "not ready\n" {
		t.Errorf("readiness GET %q: %d %q, want /readyz's 503 not ready (the issuer does not answer)", c.ReadinessProbe.HTTPGet.Path, ready.Code, ready.Body)
	}
}
