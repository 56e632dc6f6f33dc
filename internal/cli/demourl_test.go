package cli

import (
	"strings"
	"testing"
)

// TestDemoURLArgNeverHoldsAPassword: the commands demo prints give a URL
// holding a password as "$DATABASE_URL", in whichever form pgx reads it.
func TestDemoURLArgNeverHoldsAPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"postgres://demo:s3cret@127.0.0.1/demo", "host=127.0.0.1 user=demo password=s3cret", "host=127.0.0.1 user=demo password = s3cret dbname=demo"} {
		if got := demoURLArg(u); strings.Contains(got, "s3cret") {
			t.Errorf("demoURLArg(%q) = %s, which prints the password", u, got)
		}
	}
}
