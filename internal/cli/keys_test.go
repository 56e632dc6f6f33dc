package cli

import (
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/keyring"
)

// TestKeysCommands walks a rotation as the README gives it, from a bare
// key: add the new key inactive, activate it, drop the old one; list
// never prints a key.
func TestKeysCommands(t *testing.T) {
	old := strings.Repeat("3c", 32)
	t.Setenv(app.SecretKeyEnv, old)

	code, out, _ := cli(t, "keys", "list")
	if code != exitOK || out != "legacy\tactive\n" {
		t.Fatalf("keys list of a bare key: exit %d %q", code, out)
	}

	code, out, stderr := cli(t, "keys", "add")
	if code != exitOK {
		t.Fatalf("keys add: exit %d %s", code, stderr)
	}
	added := parseRing(t, out)
	ids := added.IDs()
	if len(ids) != 2 || ids[0] != keyring.Legacy || !strings.Contains(stderr, "added "+string(ids[1])+", inactive") {
		t.Fatalf("keys add = %v (%s)", ids, stderr)
	}
	fresh := ids[1]

	t.Setenv(app.SecretKeyEnv, added.Encode())
	code, out, _ = cli(t, "keys", "list")
	if code != exitOK || out != "legacy\tactive\n"+string(fresh)+"\tinactive\n" {
		t.Fatalf("keys list after add: exit %d %q", code, out)
	}
	if strings.Contains(out, old) {
		t.Fatal("keys list printed a key")
	}

	code, out, _ = cli(t, "keys", "activate", string(fresh))
	activated := parseRing(t, out)
	if code != exitOK || activated.Active().ID != fresh || activated.IDs()[1] != keyring.Legacy {
		t.Fatalf("keys activate: exit %d %v", code, activated.IDs())
	}

	t.Setenv(app.SecretKeyEnv, activated.Encode())
	code, _, stderr = cli(t, "keys", "drop", string(fresh))
	if code != exitError {
		t.Fatalf("dropping the active key: exit %d", code)
	}
	oneLine(t, stderr, string(errcode.KeyRingNoActiveKey))
	// An empty argument (`keys drop "$OLD_KID"`, the variable unset) names
	// no key, not the legacy one; nor does it make it active again.
	for _, verb := range []string{"drop", "activate"} {
		code, out, stderr = cli(t, "keys", verb, "")
		if code != exitError || out != "" {
			t.Fatalf("keys %s \"\": exit %d, printed %q", verb, code, out)
		}
		oneLine(t, stderr, string(errcode.KeyRingKIDUnknown))
	}
	code, out, _ = cli(t, "keys", "drop", string(keyring.Legacy))
	if dropped := parseRing(t, out); code != exitOK || len(dropped.IDs()) != 1 || dropped.Active().ID != fresh {
		t.Fatalf("keys drop legacy: exit %d %v", code, dropped.IDs())
	}

	// rotate adds a fresh key as the active one, the old ones kept.
	code, out, _ = cli(t, "keys", "rotate")
	rotated := parseRing(t, out)
	if code != exitOK || len(rotated.IDs()) != 3 || rotated.IDs()[1] != fresh || rotated.IDs()[2] != keyring.Legacy || rotated.Active().ID == fresh {
		t.Fatalf("keys rotate: exit %d %v", code, rotated.IDs())
	}
	code, out, _ = cli(t, "keys", "rotate", "--inactive")
	if inactive := parseRing(t, out); code != exitOK || inactive.Active().ID != fresh || len(inactive.IDs()) != 3 {
		t.Fatalf("keys rotate --inactive: exit %d %v", code, inactive.IDs())
	}

	code, _, stderr = cli(t, "keys", "activate", "k404")
	if code != exitError {
		t.Fatalf("activating an unknown kid: exit %d", code)
	}
	oneLine(t, stderr, string(errcode.KeyRingKIDUnknown))
}

func TestKeysRefuseMalformedRings(t *testing.T) {
	for _, tc := range []struct {
		name, ring string
		code       errcode.Code
	}{
		{"duplicate kid", "k1:" + strings.Repeat("11", 32) + ",k1:" + strings.Repeat("22", 32), errcode.KeyRingDuplicateKID},
		{"bad hex", "k1:" + strings.Repeat("zz", 32), errcode.KeyRingKeyInvalid},
		{"no active key", ",k1:" + strings.Repeat("11", 32), errcode.KeyRingNoActiveKey},
		{"bad entry", "k1=" + strings.Repeat("11", 32) + ",k2:" + strings.Repeat("22", 32), errcode.KeyRingEntryInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(app.SecretKeyEnv, tc.ring)
			for _, args := range [][]string{{"keys", "list"}, {"keys", "rotate"}} {
				code, out, stderr := cli(t, args...)
				if code != exitError || out != "" {
					t.Fatalf("%v: exit %d, stdout %q", args, code, out)
				}
				oneLine(t, stderr, string(tc.code))
				if strings.Contains(stderr, strings.Repeat("11", 32)) {
					t.Fatalf("%v quoted a key: %s", args, stderr)
				}
			}
		})
	}
	// With no ring, rotate and add make a first one, and say so: stored
	// in place of a ring the variable was meant to hold, it would drop
	// every key the replicas have.
	t.Setenv(app.SecretKeyEnv, "")
	for _, verb := range []string{"rotate", "add"} {
		code, out, stderr := cli(t, "keys", verb)
		if first := parseRing(t, out); code != exitOK || len(first.IDs()) != 1 ||
			!strings.Contains(stderr, app.SecretKeyEnv+" is not set: this is a first ring, of the new key alone") {
			t.Fatalf("keys %s with no ring: exit %d %v %q", verb, code, first.IDs(), stderr)
		}
	}
}

func parseRing(t *testing.T, out string) *keyring.Ring {
	t.Helper()
	r, err := keyring.Parse(out, "stdout")
	if err != nil {
		t.Fatalf("the printed ring does not parse: %v", err)
	}
	return r
}
