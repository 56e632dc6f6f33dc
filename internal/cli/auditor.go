package cli

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
)

// auditorNamePattern is what an auditor login may be called: a plain
// lower-case identifier, so that it reads the same quoted or not.
var auditorNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func newAuditorCmd() *cobra.Command {
	var url, tenant, passwordEnv string
	cmd := &cobra.Command{
		Use:   "auditor",
		Short: "Give people read-only SQL access to one tenant's audit log and approvals",
		Long: "An auditor is a Postgres LOGIN role in orangerail_auditor: it may SELECT its tenants' rows of\n" +
			"orangerail.audit, audit_heads and approvals, and run the SQL verifier, and nothing else. Which\n" +
			"tenants it sees is decided by its login name (session_user), which SQL run by the auditor\n" +
			"cannot change: set_config and SET ROLE gain nothing. Run these as the schema owner.",
	}
	databaseURLFlag(cmd.PersistentFlags(), &url)
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "", "the tenant the auditor may read (required)")

	grant := &cobra.Command{
		Use:   "grant NAME --tenant T [--password-env VAR]",
		Short: "Create the login NAME if needed and let it read tenant T",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var password string
			if passwordEnv != "" {
				if password = os.Getenv(passwordEnv); password == "" {
					return fmt.Errorf("%s is empty: it should hold the auditor's password", passwordEnv)
				}
			}
			if err := auditorGrant(cmd.Context(), url, args[0], tenant, password); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s may read tenant %s (psql as %s, then: SELECT * FROM orangerail.audit_verify('%s');)\n",
				args[0], tenant, args[0], tenant)
			return nil
		},
	}
	grant.Flags().StringVar(&passwordEnv, "password-env", "", "an environment variable holding the login's password (default: none; trust or certificate auth)")
	revoke := &cobra.Command{
		Use:   "revoke NAME --tenant T",
		Short: "Stop NAME reading tenant T (the login itself stays)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := auditorRevoke(cmd.Context(), url, args[0], tenant); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s may no longer read tenant %s\n", args[0], tenant)
			return nil
		},
	}
	cmd.AddCommand(grant, revoke)
	return cmd
}

// ownerConn connects as the URL's login (the schema owner), to a database
// whose schema is current.
func ownerConn(ctx context.Context, url, name, tenant string) (*pgx.Conn, error) {
	if !auditorNamePattern.MatchString(name) {
		return nil, errcode.New(errcode.AuditorInvalid, fmt.Sprintf("the auditor name %q is not a lower-case identifier", name), nil)
	}
	if tenant == "" {
		return nil, errcode.New(errcode.TenantInvalid, "--tenant is required", nil)
	}
	if err := database.ValidateTenantID(tenant); err != nil {
		return nil, err
	}
	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		return nil, err
	}
	err = m.Check(ctx)
	_ = m.Close()
	if err != nil {
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

func auditorGrant(ctx context.Context, url, name, tenant, password string) error {
	conn, err := ownerConn(ctx, url, name, tenant)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		ident := pgx.Identifier{name}.Sanitize()
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			// INHERIT: the login reads through orangerail_auditor's grants.
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident+" LOGIN INHERIT NOCREATEDB NOCREATEROLE NOBYPASSRLS IN ROLE orangerail_auditor"); err != nil {
				return err
			}
		} else {
			var auditor, powerful bool
			err := tx.QueryRow(ctx, `SELECT pg_has_role($1, 'orangerail_auditor', 'MEMBER'), rolsuper OR rolbypassrls OR rolcreaterole
				FROM pg_roles WHERE rolname = $1`, name).Scan(&auditor, &powerful)
			if err != nil {
				return err
			}
			if !auditor || powerful {
				return errcode.New(errcode.AuditorInvalid, fmt.Sprintf("a role %q exists and is not a plain orangerail auditor; choose another name", name), nil)
			}
		}
		if password != "" {
			// Only a SCRAM verifier reaches the server: the password itself
			// never appears in a statement a server log could keep.
			verifier, err := scramVerifier(password)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", ident, verifier)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ($1) ON CONFLICT DO NOTHING", tenant); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO orangerail.auditor_grants (role_name, tenant_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", name, tenant)
		return err
	})
}

func auditorRevoke(ctx context.Context, url, name, tenant string) error {
	conn, err := ownerConn(ctx, url, name, tenant)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DELETE FROM orangerail.auditor_grants WHERE role_name = $1 AND tenant_id = $2", name, tenant)
	return err
}

// scramIterations is the PBKDF2 cost of a SCRAM-SHA-256 verifier, as
// Postgres computes it.
const scramIterations = 4096

// scramVerifier computes the SCRAM-SHA-256 verifier Postgres stores for a
// password (RFC 5802, RFC 7677), so that the password need not be sent.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}
