package front

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/identity"
)

// TestBucketKeysAreUnambiguous: a bucket's key reads back into exactly its
// kind and parts, so two different callers (or addresses) never share a
// bucket, whatever their names hold — separators, quotes, backslashes,
// spaces, control characters or bytes that are not UTF-8.
func TestBucketKeysAreUnambiguous(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"a:b", "c", "read"}, {"a", "b:c", "read"}, // joined with ':' these were one bucket
		{"a", "b c", "read"}, {"a b", "c", "read"},
		{"a", `b" "c`, "read"}, {"a", `b`, `c" "read`},
		{"a", `b\`, "read"}, {"a", `b\" "`, "read"},
		{"acme", "agent\x00", "write"}, {"acme", "agent\xff", "write"}, {"acme", "agent\ufffd", "write"},
		{"acme", "", "read"}, {"", "acme", "read"},
	}
	seen := map[string][]string{}
	for _, parts := range cases {
		key := bucket(bucketCalls, parts...)
		if prev, ok := seen[key]; ok {
			t.Errorf("%q and %q share the bucket %s", prev, parts, key)
		}
		seen[key] = parts
		if got := parse(t, key); strings.Join(got, "\x00") != strings.Join(append([]string{string(bucketCalls)}, parts...), "\x00") {
			t.Errorf("%s reads back as %q, want %q", key, got, parts)
		}
	}
	if bucket(bucketNoToken, "203.0.113.7") == bucket(bucketBadToken, "203.0.113.7") {
		t.Error("requests without a token and refused tokens share a bucket")
	}
}

// TestCallsBucketIsTheCallers: a caller's calls are counted in a bucket
// of its own — its tenant, and its subject of its issuer: a same-named
// subject of another issuer, or of another tenant, is another caller.
func TestCallsBucketIsTheCallers(t *testing.T) {
	t.Parallel()
	caller := func(tenant, issuer, subject string) *identity.Caller {
		return &identity.Caller{Caller: engine.Caller{Tenant: tenant, Issuer: issuer, Subject: subject}}
	}
	keys := map[string]bool{}
	for _, c := range []*identity.Caller{
		caller("acme", "https://one.example", "agent-7"), caller("acme", "https://two.example", "agent-7"),
		caller("globex", "https://one.example", "agent-7"), caller("acme", "https://one.example", "agent-8"),
	} {
		for _, class := range []Class{ClassRead, ClassWrite} {
			keys[callsBucket(c, class)] = true
		}
	}
	if len(keys) != 8 {
		t.Fatalf("four callers' reads and writes fill %d buckets, want 8: %v", len(keys), keys)
	}
}

// TestCallsBucketHoldsAcrossIssuerSpellings: a caller's issuer re-spelled
// in the config (a trailing slash, the host's case, the default port) is
// the same issuer (ontology.SameIssuer): its calls spend the one
// allowance, not a fresh one. Another issuer's namesake still spends its
// own.
func TestCallsBucketHoldsAcrossIssuerSpellings(t *testing.T) {
	t.Parallel()
	caller := func(issuer string) *identity.Caller {
		return &identity.Caller{Caller: engine.Caller{Tenant: "acme", Issuer: issuer, Subject: "agent-7"}}
	}
	first := callsBucket(caller("https://id.example/realms/acme/"), ClassWrite)
	for _, respelled := range []string{"https://id.example/realms/acme", "https://ID.Example/realms/acme/", "HTTPS://id.example:443/realms/acme"} {
		if got := callsBucket(caller(respelled), ClassWrite); got != first {
			t.Errorf("the issuer spelled %s fills the bucket %s, the first spelling's %s", respelled, got, first)
		}
	}
	if callsBucket(caller("https://id.example/realms/other"), ClassWrite) == first {
		t.Error("another issuer's namesake shares the bucket")
	}
}

// parse reads a bucket key back: its kind, then its quoted parts.
func parse(t *testing.T, key string) []string {
	t.Helper()
	kind, rest, _ := strings.Cut(key, " ")
	out := []string{kind}
	for rest != "" {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		part, _ := strconv.Unquote(q)
		out = append(out, part)
		rest = strings.TrimPrefix(rest[len(q):], " ")
	}
	return out
}

// TestClientBlock: the failed-auth throttle's client is an IPv4 address,
// one an IPv6 address stands for too, or an IPv6 address's /64 (with its
// zone, for a link-local one: one block a link); a loopback address, or a
// local-use NAT64 one, alone; anything else is its own.
func TestClientBlock(t *testing.T) {
	t.Parallel()
	for address, want := range map[string]string{
		"203.0.113.7":                          "203.0.113.7",
		"::ffff:203.0.113.7":                   "203.0.113.7",
		"::ffff:0:203.0.113.7":                 "203.0.113.7",
		"::203.0.113.7":                        "203.0.113.7",
		"64:ff9b::203.0.113.7":                 "203.0.113.7",
		"64:ff9b::198.51.100.9":                "198.51.100.9",
		"2002:cb00:7107:1::5":                  "203.0.113.7",
		"2002:cb00:7107:2:a:b:c:d":             "203.0.113.7",
		"2001:0:4136:e378:8000:63bf:34ff:8ef8": "203.0.113.7",
		"64:ff9b:1::a":                         "64:ff9b:1::a",
		"64:ff9b:1::b":                         "64:ff9b:1::b",
		"2001:db8:1:2:3:4:5:6":                 "2001:db8:1:2::/64",
		"2001:db8:1:2::":                       "2001:db8:1:2::/64",
		"2001:db8:1:3::1":                      "2001:db8:1:3::/64",
		"2001:db8:1:3::1%eth0":                 "2001:db8:1:3::/64",
		"fe80::1%eth0":                         "fe80::/64%eth0",
		"fe80::2%eth0":                         "fe80::/64%eth0",
		"fe80::dead:beef%eth0":                 "fe80::/64%eth0",
		"fe80::1%eth1":                         "fe80::/64%eth1",
		"fe80::1":                              "fe80::/64",
		"::1":                                  "::1",
		"::2":                                  "::/64",
		unknownAddress:                         unknownAddress,
		"not an address":                       "not an address",
		"2001:db8::1/64 (a typo)":              "2001:db8::1/64 (a typo)",
	} {
		if got := clientBlock(address, nil); got != want {
			t.Errorf("clientBlock(%q) = %q, want %q", address, got, want)
		}
	}
}

// TestClientBlockBehindTheOperatorsTranslators: an address within one of
// http.translation_prefixes is the IPv4 client it embeds, where RFC 6052
// §2.4 puts it for each prefix length (its examples, 192.0.2.33), the
// longest prefix holding it first; an address outside them counts as it
// would without them.
func TestClientBlockBehindTheOperatorsTranslators(t *testing.T) {
	t.Parallel()
	var translators []netip.Prefix
	for _, p := range []string{"2001:db8::/32", "2001:db8:100::/40", "2001:db8:122::/48", "2001:db8:122:300::/56", "2001:db8:122:344::/64", "2001:db8:122:344::/96"} {
		translators = append(translators, netip.MustParsePrefix(p))
	}
	// As New orders them.
	slices.SortFunc(translators, func(a, b netip.Prefix) int { return b.Bits() - a.Bits() })
	for address, want := range map[string]string{
		"2001:db8:c000:221::":           "192.0.2.33",
		"2001:db8:1c0:2:21::":           "192.0.2.33",
		"2001:db8:122:c000:2:2100::":    "192.0.2.33",
		"2001:db8:122:3c0:0:221::":      "192.0.2.33",
		"2001:db8:122:344:c0:2:2100:0":  "192.0.2.33",
		"2001:db8:122:344::192.0.2.33":  "192.0.2.33",
		"2001:db8:122:344::c633:6409":   "198.51.100.9",
		"2001:db8:122:3c0:0:221::%eth0": "192.0.2.33",
		"2001:db9::1":                   "2001:db9::/64",
		"64:ff9b::203.0.113.7":          "203.0.113.7",
		"203.0.113.7":                   "203.0.113.7",
	} {
		if got := clientBlock(address, translators); got != want {
			t.Errorf("clientBlock(%q) = %q, want %q", address, got, want)
		}
	}
}
