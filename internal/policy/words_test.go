package policy

import (
	"slices"
	"testing"
)

// TestWords holds the identifier splitter to every way a description
// writes a name: the last noun, which sensitivity is judged on (spec 001,
// "Redaction decides on the noun"), is only as good as the split.
func TestWords(t *testing.T) {
	cases := map[string][]string{
		"":                    nil,
		"accessToken":         {"access", "token"},
		"AccessToken":         {"access", "token"},
		"access_token":        {"access", "token"},
		"access-token":        {"access", "token"},
		"oauth2.userinfo.get": {"oauth2", "userinfo", "get"},
		"HTTPServer":          {"http", "server"},
		// An acronym's plural s stays with it (it split "ur", "ls").
		"getURLs":    {"get", "urls"},
		"userPINs":   {"user", "pins"},
		"APIsList":   {"apis", "list"},
		"URLSafe":    {"url", "safe"},
		"getURLList": {"get", "url", "list"},
		// Known: a one-letter acronym before a word splits off (OAuth →
		// o, auth); the noun a name ends on is unaffected.
		"OAuth2Token":                   {"o", "auth2", "token"},
		"cvv2":                          {"cvv2"},
		"in0":                           {"in0"},
		"card2Number":                   {"card2", "number"},
		"TitleCaseWordsWithTokenResult": {"title", "case", "words", "with", "token", "result"},
		"  __x__  ":                     {"x"},
		"ÉtatCivil":                     {"état", "civil"},
		"a.b-c_d e":                     {"a", "b", "c", "d", "e"},
	}
	for in, want := range cases {
		if got := words(in); !slices.Equal(got, want) {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLastNoun(t *testing.T) {
	cases := []struct{ in, noun, before string }{
		{"", "", ""},
		{"___", "", ""},
		{"token", "token", ""},
		{"accessToken", "token", "access"},
		{"access_token", "token", "access"},
		{"x-api-key", "key", "api"},
		{"oauth2.tokeninfo", "tokeninfo", "oauth2"},
		{"HTTPServer", "server", "http"},
		{"OAuth2Token", "token", "auth2"},
		// A version digit is not part of the noun: cvv2 is a cvv.
		{"cvv2", "cvv", ""},
		{"cardCvv2", "cvv", "card"},
		// A trailing word of digits only is skipped.
		{"password_2", "password", ""},
		{"token.0", "token", ""},
		// A positional part keeps its letters: in0 is "in", no noun.
		{"in0", "in", ""},
		{"2", "", ""},
		{"TitleCaseWordsWithTokenResult", "result", "token"},
		{"prompt_tokens", "tokens", "prompt"},
	}
	for _, c := range cases {
		noun, before := lastNoun(c.in)
		if noun != c.noun || before != c.before {
			t.Errorf("lastNoun(%q) = %q, %q; want %q, %q", c.in, noun, before, c.noun, c.before)
		}
	}
}
