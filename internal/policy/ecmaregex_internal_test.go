package policy

import "testing"

// TestECMAToRE2: what ecmaToRE2 writes, and what it refuses because RE2
// would read it otherwise than ECMA-262 does.
func TestECMAToRE2(t *testing.T) {
	for pattern, want := range map[string]string{
		`^\d{3}-\w+\b$`: `^\d{3}-\w+\b$`,
		`^a.b$`:         "^a" + ecmaDot + "b$",
		`[.]`:           `[.]`,
		`\s`:            "[" + ecmaSpace + "]",
		`\S`:            "[^" + ecmaSpace + "]",
		`[\s\d]`:        "[" + ecmaSpace + `\d]`,
		`[\b]`:          `[\x08]`,
		`\u00e9\u002e`:  `é\.`,
		`[a[]`:          `[a\[]`,
		`(?:a)(?<n>b)`:  `(?:a)(?<n>b)`,
		`\/\.`:          `\/\.`,
	} {
		got, err := ecmaToRE2(pattern)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", pattern, got, err, want)
		}
	}
	for _, pattern := range []string{`\Ax`, `x\Z`, `x\z`, `\Qa\E`, `\pL`, `\cA`, `(?=a)`, `(?!a)`, `(?<=a)`, `(?i)a`, `(?P<n>a)`,
		`[]a]`, `[^]`, `[[:alpha:]]`, `[\S]`, `(a)\1`, `\ud83d`, `\x{41}`, `a\`, "\xff"} {
		if got, err := ecmaToRE2(pattern); err == nil {
			t.Errorf("%s: written %q, which RE2 reads otherwise than ECMA", pattern, got)
		}
	}
}
