package carrier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/examples/orders/carrier"
	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// faulty serves the carrier behind a fault: the first POST /labels reaches
// the carrier, which makes the label, and its answer is lost to a 503
// (Retry-After: 0), as a gateway in front of a real carrier may do. It
// records each request's Idempotency-Key and what the carrier answered.
type faulty struct {
	next http.Handler

	mu       sync.Mutex
	keys     []string
	answered []string // the carrier's answer to each POST
	replayed []bool
}

func (f *faulty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r)
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get(carrier.IdempotencyHeader))
	f.answered = append(f.answered, rec.Body.String())
	f.replayed = append(f.replayed, rec.Header().Get("Idempotent-Replayed") == "true")
	first := len(f.keys) == 1
	f.mu.Unlock()
	if first {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// returnLabel is the example's create_return_label as an effect, its
// upstream at url.
func returnLabel(t *testing.T, url string) engine.Effect {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Set("upstreams.shipping.base_urls.demo", url))
	x, err := httpeffect.New("create_return_label", cfg.Actions["create_return_label"])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestGovernedRetryMakesOneLabel: the example's create_return_label, its
// first answer lost, is attempted again under the same Idempotency-Key,
// and the carrier answers the retry with the label it already made: one
// label, not two. A second call is a key and a label of its own; the API
// key reaches the carrier by the upstream's scheme, and without it the
// carrier refuses the call.
func TestGovernedRetryMakesOneLabel(t *testing.T) {
	const key = "governed-test-key"
	c, err := carrier.New(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &faulty{next: c.Handler()}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	env := ontology.CredentialEnv("shipping", "key")

	t.Setenv(env, "")
	var attempts []engine.EffectAttempt
	call := &engine.EffectCall{Tenant: "acme", Action: "create_return_label",
		Input: json.RawMessage(`{"order_id":"o-1003","reason":"arrived damaged","weight_grams":1200}`),
		RecordAttempt: func(_ context.Context, a engine.EffectAttempt) error {
			attempts = append(attempts, a)
			return nil
		}}
	plain := httptest.NewServer(c.Handler())
	t.Cleanup(plain.Close)
	if _, err := returnLabel(t, plain.URL).Run(t.Context(), call); err == nil || !strings.Contains(err.Error(), "401") ||
		len(attempts) != 1 || attempts[0].Status != http.StatusUnauthorized {
		t.Fatalf("without the key: %v, attempts %+v", err, attempts)
	}

	t.Setenv(env, key)
	attempts = nil
	x := returnLabel(t, srv.URL)
	res, err := x.Run(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status int           `json:"status"`
		Body   carrier.Label `json:"body"`
	}
	if err := json.Unmarshal(res.Data, &got); err != nil {
		t.Fatal(err)
	}
	var made carrier.Label
	if len(f.answered) != 2 || json.Unmarshal([]byte(f.answered[0]), &made) != nil {
		t.Fatalf("the carrier answered %q", f.answered)
	}
	if got.Status != http.StatusCreated || got.Body != made || f.replayed[0] || !f.replayed[1] {
		t.Fatalf("the result %s; the label the lost answer held %+v; replayed %v", res.Data, made, f.replayed)
	}
	if len(f.keys) != 2 || f.keys[0] == "" || f.keys[0] != f.keys[1] {
		t.Fatalf("keys sent %q", f.keys)
	}
	if len(attempts) != 2 || attempts[0].Status != http.StatusServiceUnavailable || attempts[1].Status != http.StatusCreated {
		t.Fatalf("attempts %+v", attempts)
	}

	// A second, deliberate call: its own key, its own label.
	res2, err := x.Run(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res2.Data), made.ID) || len(f.keys) != 3 || f.keys[2] == f.keys[0] {
		t.Fatalf("a second call: %s, keys %q", res2.Data, f.keys)
	}
}
