package roles

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestGrantAndRevokeAuditor grants a new login a tenant with a password,
// and checks what Postgres holds: a plain member of orangerail_auditor,
// storing exactly the verifier of that password, granted that tenant
// only; then revokes it.
func TestGrantAndRevokeAuditor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_a")
	const password = "correct horse battery staple"
	for range 2 { // granting twice is granting once
		if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", Password: password, NewTenant: true}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		verifier         string
		member, powerful bool
		grants           []string
	)
	err := admin.QueryRow(ctx, `SELECT rolpassword, pg_has_role(rolname, 'orangerail_auditor', 'MEMBER'),
		rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb FROM pg_authid WHERE rolname = $1`, name).Scan(&verifier, &member, &powerful)
	if err == nil {
		err = admin.QueryRow(ctx, "SELECT array_agg(tenant_id) FROM orangerail.auditor_grants WHERE role_name = $1", name).Scan(&grants)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !member || powerful || len(grants) != 1 || grants[0] != "acme" {
		t.Fatalf("member %v, powerful %v, grants %v", member, powerful, grants)
	}
	iterations, salt := scramParts(t, verifier)
	if want, err := scramVerifier(password, salt, iterations); err != nil || verifier != want || !verifierPattern.MatchString(verifier) {
		t.Fatalf("stored %q, want the verifier of the password %q (%v)", verifier, want, err)
	}

	if err := RevokeAuditor(ctx, url, &RevokeAuditorParams{Name: name, Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.auditor_grants WHERE role_name = $1", name).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d grants left (%v)", left, err)
	}
}

// TestGrantsAtOnce: grants of one new login made at once each succeed —
// one creates the role, the others find it — where all but one failed on
// the role name's uniqueness, with Postgres's words.
func TestGrantsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_race")
	errs := make(chan error, 4)
	for _, tenant := range []string{"acme", "acme", "globex", "globex"} {
		go func() {
			errs <- GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: tenant, NewTenant: true})
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var grants int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.auditor_grants WHERE role_name = $1", name).Scan(&grants); err != nil || grants != 2 {
		t.Fatalf("%d grants (%v), want acme and globex", grants, err)
	}
}

// TestGrantAuditorRefuses a name that is no plain identifier, a role that
// is not a plain auditor, a malformed tenant, a password Postgres would
// change, and a database whose schema is not current; none of them leaves
// a role or a grant.
func TestGrantAuditorRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	fresh := auditorName(t, admin, "_b") // never created, unless a refusal fails
	tests := []struct {
		url  string
		p    GrantAuditorParams
		want errcode.Code
	}{
		{url, GrantAuditorParams{Name: "Robert'); DROP", Tenant: "acme"}, errcode.AuditorInvalid},
		{url, GrantAuditorParams{Name: "postgres", Tenant: "acme"}, errcode.AuditorInvalid},
		{url, GrantAuditorParams{Name: "orangerail_runtime", Tenant: "acme"}, errcode.AuditorInvalid},
		{url, GrantAuditorParams{Name: fresh, Tenant: "no tenant"}, errcode.TenantInvalid},
		{url, GrantAuditorParams{Name: fresh, Tenant: ""}, errcode.TenantInvalid},
		{url, GrantAuditorParams{Name: fresh, Tenant: "acme", Password: "pass\u00a0word", NewTenant: true}, errcode.AuditorPasswordInvalid},
		// A tenant the database does not know, without --new-tenant: a
		// typo, which granting would make a tenant of its own.
		{url, GrantAuditorParams{Name: fresh, Tenant: "acmee"}, errcode.TenantUnknown},
		{testdb.NewEmpty(t), GrantAuditorParams{Name: fresh, Tenant: "acme"}, errcode.DatabaseUnmigrated},
	}
	for _, tt := range tests {
		if err := GrantAuditor(ctx, tt.url, &tt.p); errcode.Of(err) != tt.want {
			t.Errorf("%+v: %v, want %s", tt.p, err, tt.want)
		}
	}
	var roles, grants, tenants int
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = $1), (SELECT count(*) FROM orangerail.auditor_grants), (SELECT count(*) FROM orangerail.tenants)",
		fresh).Scan(&roles, &grants, &tenants); err != nil || roles != 0 || grants != 0 || tenants != 0 {
		t.Fatalf("refusals left %d roles, %d grants and %d tenants (%v)", roles, grants, tenants, err)
	}
}

// auditorName is the name of an auditor login for a test to grant (made
// by the grant, unless it fails): a scratch role's name with suffix, its
// grants and the login itself removed when the test ends.
func auditorName(t *testing.T, admin *pgxpool.Pool, suffix string) string {
	t.Helper()
	name := scratchRole(t, admin) + suffix
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DELETE FROM orangerail.auditor_grants WHERE role_name = $1", name)
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	})
	return name
}
