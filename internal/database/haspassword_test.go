package database

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestHasPasswordReadsWhatPgxReads: every string whose password pgx would
// send is one HasPassword reports, so that demo never prints it: a
// keyword/value string may space its '=' (libpq's form allows it).
func TestHasPasswordReadsWhatPgxReads(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	for _, in := range []string{
		"host=h password = s3cret",
		"host=h user=alice password =s3cret dbname=d",
		"host=h user=alice password\t=\ts3cret",
		"password= s3cret host=h",
	} {
		cfg, err := pgconn.ParseConfig(in)
		if err != nil || cfg.Password != "s3cret" {
			t.Fatalf("pgx reads %q as password %q (%v)", in, cfg.Password, err)
		}
		if !HasPassword(in) {
			t.Errorf("HasPassword(%q) = false; pgx sends its password %q", in, cfg.Password)
		}
	}
}
