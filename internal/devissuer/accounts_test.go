package devissuer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/devissuer"
)

func TestAddAccountRefuses(t *testing.T) {
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.AddAccount(devissuer.Account{Username: "ada", Password: "pw", Subject: "s"}); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]devissuer.Account{
		"a taken username":       {Username: "ada", Password: "pw", Subject: "s2"},
		"no password":            {Username: "bob", Subject: "s"},
		"no subject":             {Username: "bob", Password: "pw"},
		"a claim the issuer set": {Username: "bob", Password: "pw", Subject: "s", Claims: map[string]any{"aud": "elsewhere"}},
		"claims that are not JSON": {Username: "bob", Password: "pw", Subject: "s",
			Claims: map[string]any{"f": func() {}}},
	} {
		if err := iss.AddAccount(a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAddClientRefuses(t *testing.T) {
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.AddClient(devissuer.Client{ID: "desk", RedirectURIs: []string{"http://127.0.0.1:8080/cb"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []devissuer.Client{
		{ID: "desk"},
		{},
		{ID: "x", RedirectURIs: []string{"/relative"}},
		{ID: "x", RedirectURIs: []string{"javascript:alert(1)"}},
		{ID: "x", RedirectURIs: []string{"http://127.0.0.1/cb#fragment"}},
		{ID: "x", RedirectURIs: []string{"http://user:pw@127.0.0.1/cb"}},
	} {
		if err := iss.AddClient(c); err == nil {
			t.Errorf("client %+v: accepted", c)
		}
	}
}

func TestConfigRefusesAnIntervalThatIsNotWholeSeconds(t *testing.T) {
	for _, cfg := range []devissuer.Config{{DevicePollInterval: 1500 * time.Millisecond}, {CodeTTL: -1}} {
		if _, err := devissuer.NewWithConfig(cfg); err == nil || !strings.Contains(err.Error(), "devissuer") {
			t.Errorf("config %+v: %v", cfg, err)
		}
	}
}
