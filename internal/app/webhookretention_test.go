package app

import (
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestWebhookRetention: the config's webhook_retention, in days or as a
// duration, is the retention the webhook worker is made with; absent, zero,
// which the worker takes as webhooks.RetentionDefault (30 days).
func TestWebhookRetention(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		line string
		want time.Duration
	}{
		{"", 0},
		{"webhook_retention: 7d\n", 7 * 24 * time.Hour},
		{"webhook_retention: 90m\n", 90 * time.Minute},
		{"webhook_retention: 1h\n", time.Hour},
	} {
		cfg, err := ontology.Parse([]byte("service: s\n" + tt.line))
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		if got := webhookRetention(cfg); got != tt.want {
			t.Errorf("%q: retention %s, want %s", tt.line, got, tt.want)
		}
	}
}
