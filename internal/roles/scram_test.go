package roles

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// verifierPattern is the form of a SCRAM-SHA-256 verifier with a 16-byte
// salt: nothing a SQL string literal would need escaped.
var verifierPattern = regexp.MustCompile(`^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`)

// scramParts splits a verifier into its iterations and salt.
func scramParts(t *testing.T, verifier string) (int, []byte) {
	t.Helper()
	m := regexp.MustCompile(`^SCRAM-SHA-256\$([0-9]+):([^$]+)\$`).FindStringSubmatch(verifier)
	if m == nil {
		t.Fatalf("%q is not a SCRAM-SHA-256 verifier", verifier)
	}
	iterations, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	salt, err := base64.StdEncoding.DecodeString(m[2])
	if err != nil {
		t.Fatal(err)
	}
	return iterations, salt
}

// scratchRole creates a login role of a fresh name, dropped when the test
// ends, and returns its name.
func scratchRole(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "orangerail_scram_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	})
	return name
}

// TestScramVerifierIsPostgres's: Postgres computes the verifier of each
// password itself (sent in the clear, here only), and ScramVerifier must
// either compute the same string under the salt and cost Postgres chose,
// or refuse the password. Before, a password SASLprep changes got a
// verifier of its unprepared form, which no client's login matches.
func TestScramVerifierIsPostgres(t *testing.T) {
	t.Parallel()
	admin := testdb.Pool(t, testdb.New(t))
	ctx := context.Background()
	name := scratchRole(t, admin)
	role := pgx.Identifier{name}.Sanitize()
	tests := []struct {
		password string
		refused  bool // SASLprep changes it
	}{
		{"correct horse battery staple", false},
		{"x", false},
		{`it's "quoted" \ and $dollared$`, false},
		{"pässwörd", false},           // composed: SASLprep leaves it
		{"日本語のパスワード", false},          // NFKC-stable
		{"a\x01b", false},             // a control character: SASLprep fails, the raw bytes count
		{"\U0001F600 emoji", false},   // unassigned in SASLprep's Unicode 3.2: the raw bytes count
		{"pass\u00a0word", true},      // a no-break space: SASLprep maps it to a space
		{"pass\u3000word", true},      // an ideographic space, likewise
		{"pass\u00adword", true},      // a soft hyphen: SASLprep maps it to nothing
		{"pass\u200dword", true},      // a zero-width joiner, likewise
		{"pa\u0308ss", true},          // a decomposed umlaut: NFKC composes it
		{"ｐａｓｓ", true},                // fullwidth letters: NFKC folds them
		{"\u2163 and \ufb01ne", true}, // a roman numeral and a ligature: NFKC expands them
		{"a\x01b\u00ad", true},        // SASLprep would fail (raw bytes), but refusing is safe
	}
	for _, tt := range tests {
		conn, err := admin.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'")
		if err == nil {
			_, err = conn.Exec(ctx, "ALTER ROLE "+role+" PASSWORD "+quoteLiteral(tt.password))
		}
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		var theirs string
		if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", name).Scan(&theirs); err != nil {
			t.Fatal(err)
		}
		if _, err := ScramVerifier(tt.password); tt.refused != (errcode.Of(err) == errcode.AuditorPasswordInvalid) {
			t.Errorf("password %q: ScramVerifier = %v; refused should be %v", tt.password, err, tt.refused)
		}
		if tt.refused {
			continue
		}
		iterations, salt := scramParts(t, theirs)
		ours, err := scramVerifier(tt.password, salt, iterations)
		if err != nil {
			t.Fatal(err)
		}
		if ours != theirs {
			t.Errorf("password %q: Postgres stores %s, orangerail computes %s", tt.password, theirs, ours)
		}
	}
}

// quoteLiteral quotes s as a standard SQL string literal.
func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := range len(s) {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// TestScramVerifierForm: a fresh verifier has Postgres' cost and salt size
// and holds nothing a SQL literal would need escaped; two verifiers of one
// password differ by their salts.
func TestScramVerifierForm(t *testing.T) {
	t.Parallel()
	a, err := ScramVerifier("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ScramVerifier("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !verifierPattern.MatchString(a) || a == b {
		t.Fatalf("verifiers %q and %q", a, b)
	}
}
