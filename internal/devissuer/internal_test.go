package devissuer

import (
	"fmt"
	"strings"
	"testing"
)

func TestPasswordsAndSecretsAreKeptOnlyAsHashes(t *testing.T) {
	iss, err := New()
	if err != nil {
		t.Fatal(err)
	}
	const password, secret = "a password to find", "a secret to find"
	if err := iss.AddAccount(Account{Username: "ada", Password: password, Subject: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := iss.AddClient(Client{ID: "desk", Secret: secret}); err != nil {
		t.Fatal(err)
	}
	dump := fmt.Sprintf("%#v %#v %#v", *iss.accounts["ada"], *iss.clients["desk"], *iss.clients["desk"].secret)
	for _, plain := range []string{password, secret} {
		if strings.Contains(dump, plain) || strings.Contains(dump, fmt.Sprintf("%x", plain)) {
			t.Fatalf("%q is kept in memory: %s", plain, dump)
		}
	}
	if _, ok := iss.authenticate("ada", password); !ok {
		t.Fatal("the right password does not match its hash")
	}
	if _, ok := iss.authenticate("ada", password+" "); ok {
		t.Fatal("a different password matches")
	}
}

func TestUserCodesUseTheWholeAlphabetAndNormalize(t *testing.T) {
	seen := map[rune]bool{}
	for range 500 {
		code := newUserCode()
		if len(code) != userCodeLength || normalizeUserCode(code) != code {
			t.Fatalf("user code %q", code)
		}
		for _, r := range code {
			seen[r] = true
		}
	}
	if len(seen) != len(userCodeAlphabet) {
		t.Errorf("500 codes used %d of %d letters", len(seen), len(userCodeAlphabet))
	}
	for typed, want := range map[string]string{
		"bcdf-ghjk": "BCDFGHJK", " BCDF GHJK ": "BCDFGHJK", "BCDF-GHJ": "", "BCDF-GHJA": "", "BCDF-GHJ1": "", "": "",
	} {
		if got := normalizeUserCode(typed); got != want {
			t.Errorf("normalizeUserCode(%q) = %q, want %q", typed, got, want)
		}
	}
}
