package roles

import (
	"context"
	"slices"
	"strings"
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
	if left := grantsOf(t, admin, name); left != 0 {
		t.Fatalf("%d grants left", left)
	}
	// The tenant's chain tells who could read it, and since when: the
	// grant once (granting twice is granting once), the password each
	// time it was set, then the revoke, each the operator's, naming the
	// login.
	want := []string{"auditor_granted operator postgres " + name, "auditor_password_set operator postgres " + name,
		"auditor_password_set operator postgres " + name, "auditor_revoked operator postgres " + name}
	if got := accessRecords(t, admin, "acme"); !slices.Equal(got, want) {
		t.Fatalf("acme's chain holds %q, want %q", got, want)
	}
}

// TestPasswordSetIsRecordedWhereTheLoginReads: a login's password is the
// cluster's, so setting it through a grant of one tenant is recorded in
// the chain of every tenant the login reads, in the transaction that
// sets it; a tenant it does not read records nothing, and neither does
// a grant that sets no password.
func TestPasswordSetIsRecordedWhereTheLoginReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name, other := auditorName(t, admin, "_p"), auditorName(t, admin, "_q")
	for _, g := range []GrantAuditorParams{{Name: name, Tenant: "acme"}, {Name: name, Tenant: "globex"}, {Name: other, Tenant: "initech"}} {
		g.NewTenant = true
		if err := GrantAuditor(ctx, url, &g); err != nil {
			t.Fatal(err)
		}
	}
	if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", Password: "a new one"}); err != nil {
		t.Fatal(err)
	}
	set := "auditor_password_set operator postgres " + name
	for tenant, want := range map[string][]string{
		"acme":    {"auditor_granted operator postgres " + name, set},
		"globex":  {"auditor_granted operator postgres " + name, set},
		"initech": {"auditor_granted operator postgres " + other},
	} {
		if got := accessRecords(t, admin, tenant); !slices.Equal(got, want) {
			t.Errorf("%s's chain holds %q, want %q", tenant, got, want)
		}
	}
}

// TestPasswordSetBesideARevoke: a grant setting the password and a revoke
// of another tenant, at once, run one after the other: the revoked
// tenant's chain never records the password set after the revoke, for a
// login that no longer reads it.
func TestPasswordSetBesideARevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_s")
	if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", NewTenant: true}); err != nil {
		t.Fatal(err)
	}
	for range 25 {
		if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "globex", NewTenant: true}); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		go func() {
			errs <- GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", Password: "again"})
		}()
		go func() { errs <- RevokeAuditor(ctx, url, &RevokeAuditorParams{Name: name, Tenant: "globex"}) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		records := accessRecords(t, admin, "globex")
		if last := records[len(records)-1]; !strings.HasPrefix(last, "auditor_revoked ") {
			t.Fatalf("globex's chain ends %q, after the revoke: %q", last, records)
		}
	}
}

// grantsOf counts the tenants the login may read.
func grantsOf(t *testing.T, admin *pgxpool.Pool, name string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM orangerail.auditor_grants WHERE role_name = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// accessRecords are the tenant's records of auditors granted or revoked,
// in the order written: phase, actor kind, actor and the login named.
func accessRecords(t *testing.T, admin *pgxpool.Pool, tenant string) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT concat_ws(' ', phase, actor_kind, actor, convert_from(entry, 'UTF8')::jsonb->'result'->>'auditor')
		FROM orangerail.audit WHERE tenant_id = $1 AND phase LIKE 'auditor%' ORDER BY id`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
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
	if n := grantsOf(t, admin, name); n != 2 {
		t.Fatalf("%d grants, want acme and globex", n)
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

// TestGrantRefusesRolesThatAreMoreThanAnAuditor: an existing role is
// granted a tenant, and has its password set, only when it is what
// GrantAuditor would have made: a login in orangerail_auditor and nothing
// more. The group role itself (no login), a login that may also act as
// orangerail_runtime, one that owns a table, one that replicates are each
// X_AUDITOR_INVALID, their password as it was and no grant made; a plain
// one is granted.
func TestGrantRefusesRolesThatAreMoreThanAnAuditor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	login := func(suffix, options string, then ...string) string {
		t.Helper()
		name := auditorName(t, admin, suffix)
		if _, err := admin.Exec(ctx, "CREATE ROLE "+name+" LOGIN PASSWORD 'before' "+options); err != nil {
			t.Fatal(err)
		}
		for _, sql := range then {
			if _, err := admin.Exec(ctx, strings.ReplaceAll(sql, "%s", name)); err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	table := "public.owned_" + strings.TrimPrefix(scratchRole(t, admin), "orangerail_scram_")
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	password := func(name string) string {
		t.Helper()
		var v *string
		if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return ""
		}
		return *v
	}
	for _, name := range []string{
		AuditorRole,
		login("_runtime", "IN ROLE orangerail_runtime, orangerail_auditor"),
		login("_owner", "IN ROLE orangerail_auditor", "CREATE TABLE "+table+" (id int)", "ALTER TABLE "+table+" OWNER TO %s"),
		login("_granted", "IN ROLE orangerail_auditor", "CREATE TABLE IF NOT EXISTS "+table+" (id int)", "GRANT SELECT ON "+table+" TO %s"),
		login("_replication", "REPLICATION IN ROLE orangerail_auditor"),
		login("_noinherit", "NOINHERIT IN ROLE orangerail_auditor"),
	} {
		before := password(name)
		err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", Password: "after the grant", NewTenant: true})
		if errcode.Of(err) != errcode.AuditorInvalid {
			t.Errorf("%s: %v, want %s", name, err, errcode.AuditorInvalid)
		}
		if password(name) != before {
			t.Errorf("%s: its password was changed", name)
		}
	}
	var grants int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.auditor_grants").Scan(&grants); err != nil || grants != 0 {
		t.Fatalf("%d grants (%v)", grants, err)
	}
	if got := accessRecords(t, admin, "acme"); len(got) != 0 {
		t.Fatalf("refused grants left records: %q", got)
	}
	plain := login("_plain", "IN ROLE orangerail_auditor")
	if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: plain, Tenant: "acme", Password: "after the grant", NewTenant: true}); err != nil {
		t.Fatalf("a plain auditor made by hand: %v", err)
	}
}

// TestRevokeOfNoGrantIsRefused: revoking a grant the login does not have
// (a typo of the tenant, or of the login) revokes nothing and says so,
// naming what the login may read; the grant meant stays until revoked.
func TestRevokeOfNoGrantIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_r")
	if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", NewTenant: true}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, tenant, says string }{
		{name, "acm", "(it may read acme)"},
		{name + "x", "acme", "(it may read no tenant of this database)"},
	} {
		err := RevokeAuditor(ctx, url, &RevokeAuditorParams{Name: tt.name, Tenant: tt.tenant})
		if errcode.Of(err) != errcode.AuditorGrantNotFound || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("revoke %s of %s: %v, want %s saying %q", tt.name, tt.tenant, err, errcode.AuditorGrantNotFound, tt.says)
		}
	}
	grants := func() int { return grantsOf(t, admin, name) }
	if n := grants(); n != 1 {
		t.Fatalf("%d grants of acme after the refused revokes", n)
	}
	if got := accessRecords(t, admin, "acme"); len(got) != 1 {
		t.Fatalf("the refused revokes left records: %q", got)
	}
	if err := RevokeAuditor(ctx, url, &RevokeAuditorParams{Name: name, Tenant: "acme"}); err != nil || grants() != 0 {
		t.Fatalf("revoke: %v, %d grants left", err, grants())
	}
	if err := RevokeAuditor(ctx, url, &RevokeAuditorParams{Name: name, Tenant: "acme"}); errcode.Of(err) != errcode.AuditorGrantNotFound {
		t.Fatalf("revoking it again: %v", err)
	}
}

// TestGrantsOfOneLoginToTwoDatabases: a login is the cluster's, the lock
// that serves grants of one name one after the other a database's. A
// grant to one database waits on CREATE ROLE while a grant to another
// holds the name uncommitted, then finds the role made and is granted,
// where it failed with Postgres's own words (23505).
func TestGrantsOfOneLoginToTwoDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_two")
	// The other database's grant, as far as its CREATE ROLE, uncommitted.
	other, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(context.Background()) }()
	if _, err := other.Exec(ctx, "CREATE ROLE "+name+" LOGIN INHERIT IN ROLE orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", NewTenant: true})
	}()
	// Once the grant waits on the name, the other commits.
	for waiting := false; !waiting; {
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE ROLE %' AND pid <> pg_backend_pid())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the grant ended before the other committed: %v", err)
		default:
		}
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the grant waiting on the name: %v", err)
	}
	if n := grantsOf(t, admin, name); n != 1 {
		t.Fatalf("%d grants", n)
	}
}

// TestGrantAndRevokeNeedTheOwner: the runtime's login may neither grant
// nor revoke an auditor; it is told so, coded, never with the database's
// words, and nothing changes.
func TestGrantAndRevokeNeedTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	name := auditorName(t, admin, "_o")
	if err := GrantAuditor(ctx, url, &GrantAuditorParams{Name: name, Tenant: "acme", NewTenant: true}); err != nil {
		t.Fatal(err)
	}
	runtime := scratchRole(t, admin)
	if _, err := admin.Exec(ctx, "GRANT orangerail_runtime TO "+runtime); err != nil {
		t.Fatal(err)
	}
	runtimeURL := testdb.WithUser(t, url, runtime, "")
	for what, err := range map[string]error{
		"grant":           GrantAuditor(ctx, runtimeURL, &GrantAuditorParams{Name: name, Tenant: "globex", NewTenant: true}),
		"grant a new one": GrantAuditor(ctx, runtimeURL, &GrantAuditorParams{Name: name + "_new", Tenant: "acme"}),
		"revoke":          RevokeAuditor(ctx, runtimeURL, &RevokeAuditorParams{Name: name, Tenant: "acme"}),
	} {
		if errcode.Of(err) != errcode.BreakGlassRefused || strings.Contains(err.Error(), "SQLSTATE") {
			t.Errorf("%s as the runtime's login: %v, want %s", what, err, errcode.BreakGlassRefused)
		}
	}
	if got := accessRecords(t, admin, "acme"); len(got) != 1 {
		t.Fatalf("acme's records of access: %q, want the owner's grant alone", got)
	}
}
