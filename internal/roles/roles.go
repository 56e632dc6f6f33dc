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

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
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
// plain orangerail auditor: it never turns an existing role into one.
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
	// Scoped to the tenant: TenantOpen makes its chain's head.
	return database.InTenant(ctx, conn, p.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		s := store.New(tx)
		ident := pgx.Identifier{p.Name}.Sanitize()
		// Two grants of one new name at once: the second waits, then finds
		// the role the first made (it failed on CREATE ROLE's unique name).
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('orangerail.auditor:' || $1, 0))", p.Name); err != nil {
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
		case !role.Auditor || role.Powerful:
			return errcode.New(errcode.AuditorInvalid, fmt.Sprintf("a role %q exists and is not a plain orangerail auditor; choose another name", p.Name), nil)
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
		return s.AuditorGrantAdd(ctx, &store.AuditorGrantParams{RoleName: p.Name, TenantID: p.Tenant})
	})
}

// RevokeAuditorParams name an auditor login and a tenant.
type RevokeAuditorParams struct {
	Name   string
	Tenant string
}

// RevokeAuditor stops the login p.Name reading tenant p.Tenant. The login
// itself stays. It connects as GrantAuditor does.
func RevokeAuditor(ctx context.Context, ownerURL string, p *RevokeAuditorParams) error {
	conn, err := ownerConn(ctx, ownerURL, p.Name, p.Tenant)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return store.New(conn).AuditorGrantRemove(ctx, &store.AuditorGrantParams{RoleName: p.Name, TenantID: p.Tenant})
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
