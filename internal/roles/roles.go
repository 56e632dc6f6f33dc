// Package roles owns the Postgres logins orangerail makes for people: an
// auditor login, the tenants it may read, and the SCRAM verifier its
// password is stored as. The roles the schema itself needs
// (orangerail_runtime, orangerail_auditor, ...) are the migrations'.
package roles

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// AuditorRole is the role every auditor login is a member of: it may
// SELECT its tenants' rows of the audit log and approvals, and run the SQL
// verifier (migrations/00001).
const AuditorRole = "orangerail_auditor"

// auditorNamePattern is what an auditor login may be called: a plain
// lower-case identifier, so that it reads the same quoted or not.
var auditorNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// GrantAuditorParams name an auditor login, the tenant it may read, and
// its password.
type GrantAuditorParams struct {
	// Name is the login: a lower-case identifier, [a-z_][a-z0-9_]{0,62}.
	Name string
	// Tenant is the tenant the login may read.
	Tenant string
	// Password is the login's password; empty sets none (trust or
	// certificate authentication). Only its SCRAM verifier reaches the
	// server.
	Password string
	// NewTenant grants a tenant that has no records yet (an auditor
	// named before the tenant's first call): without it, a tenant the
	// database does not know is refused, since granting opens it and a
	// mistyped id would become a tenant of its own.
	NewTenant bool
}

// GrantAuditor lets the login p.Name read tenant p.Tenant, creating the
// login (a plain member of orangerail_auditor) if it does not exist. It
// connects as ownerURL's login, which must own orangerail's schema, to a
// database whose schema is current. It refuses, with X_AUDITOR_INVALID, a
// name that is not a plain identifier or that names a role that is not a
// plain orangerail auditor (notPlainAuditor): it never turns an existing role
// into one, nor sets the password of one it did not make.
func GrantAuditor(ctx context.Context, ownerURL string, p *GrantAuditorParams) error {
	var verifier string
	if p.Password != "" {
		var err error
		if verifier, err = ScramVerifier(p.Password); err != nil {
			return err
		}
	}
	conn, err := ownerConn(ctx, ownerURL, p.Name, p.Tenant)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = grantAuditor(ctx, conn, p, verifier)
	if roleMadeMeanwhile(err) {
		// A grant of the same new name to another database of the cluster
		// made the role while this one waited to: the advisory lock is
		// the database's, a role the cluster's. Once more, finding it.
		err = grantAuditor(ctx, conn, p, verifier)
	}
	return notTheOwner(err)
}

// notTheOwner is err, or, where it is a privilege the login lacks (it is
// not the schema's owner: the runtime's URL, say), X_BREAK_GLASS_REFUSED
// saying so rather than the database's words.
func notTheOwner(err error) error {
	if errors.Is(store.InterpretError(err), store.ErrPermission) {
		return errcode.New(errcode.BreakGlassRefused, "this login may not grant or revoke an auditor: run it as the owner of the orangerail schema, with the URL `orangerail migrate` runs with", err)
	}
	return err
}

// grantAuditor is GrantAuditor's one transaction on conn.
func grantAuditor(ctx context.Context, conn *pgx.Conn, p *GrantAuditorParams, verifier string) error {
	// Scoped to the tenant: TenantOpen makes its chain's head.
	return database.InTenant(ctx, conn, p.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		s := store.New(tx)
		ident := pgx.Identifier{p.Name}.Sanitize()
		// Two grants of one new name to this database at once: the second
		// waits, then finds the role the first made.
		if err := lockAuditor(ctx, tx, p.Name); err != nil {
			return err
		}
		role, err := s.RoleGet(ctx, p.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// INHERIT: the login reads through orangerail_auditor's grants.
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident+" LOGIN INHERIT NOCREATEDB NOCREATEROLE NOBYPASSRLS IN ROLE "+
				pgx.Identifier{AuditorRole}.Sanitize()); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if why := notPlainAuditor(role); why != "" {
				return errcode.New(errcode.AuditorInvalid, fmt.Sprintf("a role %q exists and is not a plain orangerail auditor: %s; choose another name", p.Name, why), nil)
			}
		}
		if verifier != "" {
			// The verifier is base64 and '$', ':' and digits: a literal
			// that needs no escaping, checked by ScramVerifier's test.
			if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", ident, verifier)); err != nil {
				return err
			}
		}
		if !p.NewTenant {
			known, err := s.TenantList(ctx)
			if err != nil {
				return err
			}
			if !slices.Contains(known, p.Tenant) {
				return errcode.New(errcode.TenantUnknown, fmt.Sprintf("tenant %q has no records in this database: a typo? To grant an auditor a tenant before its first record, pass --new-tenant", p.Tenant), nil)
			}
		}
		if err := s.TenantOpen(ctx); err != nil {
			return err
		}
		added, err := s.AuditorGrantAdd(ctx, &store.AuditorGrantParams{RoleName: p.Name, TenantID: p.Tenant})
		if err != nil {
			return err
		}
		now := time.Now()
		if added {
			if err := engine.RecordAuditorAccess(ctx, tx, p.Tenant, p.Name, true, now); err != nil {
				return err
			}
		}
		if verifier == "" {
			return nil
		}
		return recordPasswordSet(ctx, tx, p, now)
	})
}

// recordPasswordSet records, in tx, the auditor login's password set in
// the chain of every tenant of this database it reads, p.Tenant's among
// them: the password is the login's, so whoever holds it reads each of
// them as the login from now on. tx is left scoped to p.Tenant.
func recordPasswordSet(ctx context.Context, tx pgx.Tx, p *GrantAuditorParams, now time.Time) error {
	grants, err := store.New(tx).AuditorGrantList(ctx, "", p.Name)
	if err != nil {
		return err
	}
	for _, g := range grants {
		if err := database.Rescope(ctx, tx, g.Tenant); err != nil {
			return err
		}
		if err := engine.RecordAuditorPasswordSet(ctx, tx, g.Tenant, p.Name, now); err != nil {
			return err
		}
	}
	return database.Rescope(ctx, tx, p.Tenant)
}

// lockAuditor holds, until tx ends, this database's lock of the auditor
// login name: its grants and revokes run one at a time, so that a grant
// setting its password records it in exactly the tenants the login reads
// as it commits (recordPasswordSet), and a grant finds the role another
// one made.
func lockAuditor(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('orangerail.auditor:' || $1, 0))", name)
	return err
}

// notPlainAuditor says why role is not a plain orangerail auditor, as
// GrantAuditor makes one; "" when it is. Granting a tenant to, or setting
// the password of, a role that is more (one that may act as the runtime
// or the owner, a replication login) would hand an auditor's grant, or
// the password of a login others use, to what it is not.
func notPlainAuditor(role *store.Role) string {
	switch {
	case !role.Auditor:
		return "it is not a member of " + AuditorRole
	case !role.Login:
		return "it cannot log in (or does not inherit)"
	case role.Powerful:
		return "it holds a power no auditor may (superuser, bypassing RLS, creating roles or databases, replication)"
	case len(role.OtherRoles) > 0:
		return fmt.Sprintf("it is a member of %v too", role.OtherRoles)
	case role.NamedByObjects:
		return "an object of some database names it (it owns one, or is granted one)"
	}
	return ""
}

// roleMadeMeanwhile reports whether err is CREATE ROLE failing on a name
// another transaction took meanwhile: the unique index of pg_authid
// (23505), or the name found taken (42710).
func roleMadeMeanwhile(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.UniqueViolation || pgErr.Code == pgerrcode.DuplicateObject)
}

// RevokeAuditorParams name an auditor login and a tenant.
type RevokeAuditorParams struct {
	Name   string
	Tenant string
}

// RevokeAuditor stops the login p.Name reading tenant p.Tenant. The login
// itself stays. It connects as GrantAuditor does. A login with no such
// grant (a typo of either) is X_AUDITOR_GRANT_NOT_FOUND, naming the
// tenants it may read: nothing was revoked, and the grant that was meant
// may still stand.
func RevokeAuditor(ctx context.Context, ownerURL string, p *RevokeAuditorParams) error {
	conn, err := ownerConn(ctx, ownerURL, p.Name, p.Tenant)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var removed bool
	var granted []*store.AuditorGrant // when nothing was removed: what the login may read
	err = database.InTenant(ctx, conn, p.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		if err := lockAuditor(ctx, tx, p.Name); err != nil {
			return err
		}
		s := store.New(tx)
		if removed, err = s.AuditorGrantRemove(ctx, &store.AuditorGrantParams{RoleName: p.Name, TenantID: p.Tenant}); err != nil {
			return err
		}
		if removed {
			return engine.RecordAuditorAccess(ctx, tx, p.Tenant, p.Name, false, time.Now())
		}
		granted, err = s.AuditorGrantList(ctx, "", p.Name)
		return err
	})
	if err != nil || removed {
		return notTheOwner(err)
	}
	reads := "it may read no tenant of this database"
	if len(granted) > 0 {
		tenants := make([]string, len(granted))
		for i, g := range granted {
			tenants[i] = g.Tenant
		}
		reads = "it may read " + strings.Join(tenants, ", ")
	}
	return errcode.New(errcode.AuditorGrantNotFound, fmt.Sprintf("%s has no grant of tenant %s: nothing was revoked (%s)", p.Name, p.Tenant, reads), nil)
}

// ListAuditors returns the auditor logins' grants, by tenant then login:
// every tenant's, or tenant's alone when it is not empty. It connects as
// GrantAuditor does: the schema's owner sees every grant, an auditor
// login its own, and a login that may read none (the runtime's) is
// X_BREAK_GLASS_REFUSED. The tenants' chains hold when each
// was granted and revoked, and by whom (RecordAuditorAccess).
func ListAuditors(ctx context.Context, ownerURL, tenant string) ([]*store.AuditorGrant, error) {
	if tenant != "" {
		if err := database.ValidateTenantID(tenant); err != nil {
			return nil, err
		}
	}
	conn, err := connect(ctx, ownerURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := store.New(conn)
	// Row Level Security shows an auditor login its own grants alone: the
	// list is whole only as the owner (or a superuser) reads it.
	op, err := st.SessionOperatorGet(ctx)
	if err != nil {
		return nil, err
	}
	if !op.Owner {
		return nil, errcode.New(errcode.BreakGlassRefused, fmt.Sprintf("this login (%s) reads only its own grants, not every one: "+
			"list them as the owner of the orangerail schema, with the URL `orangerail migrate` runs with", op.Login), nil)
	}
	if tenant != "" {
		// As grant and revoke refuse it: a typo listed nobody, exit 0, as
		// if no login could read the tenant.
		known, err := st.TenantList(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(known, tenant) {
			return nil, errcode.New(errcode.TenantUnknown, fmt.Sprintf("tenant %q is no tenant of this database: a typo?", tenant), nil)
		}
	}
	grants, err := st.AuditorGrantList(ctx, tenant, "")
	return grants, notTheOwner(err)
}

// ownerConn checks an auditor's name and tenant, then connects as the
// URL's login (the schema owner) to a database whose schema is current.
func ownerConn(ctx context.Context, url, name, tenant string) (*pgx.Conn, error) {
	if !auditorNamePattern.MatchString(name) {
		return nil, errcode.New(errcode.AuditorInvalid, fmt.Sprintf("the auditor name %q is not a lower-case identifier", name), nil)
	}
	if err := database.ValidateTenantID(tenant); err != nil {
		return nil, err
	}
	return connect(ctx, url)
}

// connect opens one connection to url, a database whose schema is
// current, its errors named as database.Open names them (never the URL's
// password).
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	if err := database.CheckCurrent(ctx, url); err != nil {
		return nil, err
	}
	cfg, err := database.ParseURL(url)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, database.ClassifyConnectError(cfg.ConnConfig, err)
	}
	return conn, nil
}
