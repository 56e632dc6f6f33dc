// Package cli is orangerail's command line: the cobra tree parses flags,
// calls the runtime app opens (or the engine and database packages), and
// prints. It holds no rule of its own: what it refuses, the packages below
// refuse.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
)

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // the command ran and found a problem (audit verify)
	exitError    = 2 // the command could not run
)

// errFindings marks a command that ran and reported findings.
var errFindings = errors.New("findings reported")

// Run executes the command line and returns the process exit code. Errors
// are printed as one line, with the code's fix, never as a stack trace.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	ran := false
	markRuns(root, &ran)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFindings):
		return exitFindings
	}
	var coded *errcode.Error
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// A signal ended it (cmd/orangerail's context): what it was doing
		// when stopped is not the error's subject.
		err = errcode.New(errcode.Interrupted, "stopped by a signal before it finished", err)
	}
	if !ran && !errors.As(err, &coded) {
		// Cobra refused the command line before the command ran: an
		// unknown command or flag, a required flag missing, an argument
		// count. Its words, under the code every such refusal carries.
		err = errcode.New(errcode.Usage, err.Error(), err)
	}
	err = database.ClassifyCommandError(err)
	var pathErr *fs.PathError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &coded):
	case errors.As(err, &pathErr):
		// A file the command line named (--keys-file, a proof, --out):
		// its path and the system's reason, under the code they share.
		err = errcode.New(errcode.FileUnusable, err.Error(), err)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InsufficientPrivilege:
		// A login without a right the command needs (migrate by the
		// runtime's login, auditor grant by an auditor's): an operator's
		// mistake of which login to use, said as one.
		err = errcode.New(errcode.DatabaseRoleMissing, "this login lacks a privilege the command needs ("+pgErr.Message+"); run it as the login the README names for it", err)
	}
	// An error can carry what an agent sent or a database said: shown
	// through display.Text, it stays one line and cannot rewrite the
	// terminal.
	printError(stderr, err)
	return exitError
}

// markRuns makes every command of c's tree set *ran as its own RunE
// begins: an error before then is the command line's.
func markRuns(c *cobra.Command, ran *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRuns(sub, ran)
	}
}

// printError prints err whole, not only its coded part: what wraps it
// says where it happened (which tenant of a run over all of them). Errors
// joined are each printed on a line of their own, with their own fix.
func printError(stderr io.Writer, err error) {
	named := strings.NewReplacer("`orangerail ", "`"+shellJoin([]string{invokedAs()})+" ")
	for _, err := range joined(err) {
		var coded *errcode.Error
		if errors.As(err, &coded) {
			fmt.Fprintf(stderr, "orangerail: %s. Fix: %s\n", named.Replace(codedText(err, coded)), named.Replace(coded.Fix()))
		} else {
			fmt.Fprintf(stderr, "orangerail: %s\n", named.Replace(display.Text(err.Error())))
		}
	}
}

// codedText is err as printError shows it, err's chain holding coded: as
// display.Text shows it, but for coded's code, which is never quoted with
// a message that needs quoting (the problems of a config, a line each), so
// that every coded line holds its code as a script reads it,
// "orangerail: [what wraps it: ]X_CODE: …".
func codedText(err error, coded *errcode.Error) string {
	text := err.Error()
	wrapping, ok := strings.CutSuffix(text, coded.Error())
	if !ok {
		return display.Text(text)
	}
	if wrapping != "" {
		wrapping = display.Text(wrapping)
	}
	return wrapping + display.Text(string(coded.Code)) + ": " + display.Text(coded.Msg)
}

// invokedAs is the program as its operator ran it — bin/orangerail in a
// checkout after `make run`, a path, or orangerail found on the PATH — so
// that a command an error names (`orangerail login`) runs as printed. A
// process that is not orangerail's binary (a test's) names orangerail.
func invokedAs() string {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == "orangerail" {
		return os.Args[0]
	}
	return "orangerail"
}

// joined returns the errors err joins, when it is an errors.Join of them
// (its text theirs, a line each); else err alone. An error that wraps
// several with words of its own (fmt.Errorf with two %w) is one error.
func joined(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	errs := j.Unwrap()
	texts := make([]string, len(errs))
	for i, e := range errs {
		texts[i] = e.Error()
	}
	if strings.Join(texts, "\n") != err.Error() {
		return []error{err}
	}
	return errs
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "orangerail",
		Short:         "Govern what AI agents may do with your data",
		Long:          "orangerail serves a declared ontology over MCP, stages writes as approvals a person decides,\nand records every governed step in a hash-chained, append-only audit log in Postgres.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newAuditCmd(), newConfigCmd(), newApprovalsCmd(), newAuditorCmd(), newErrorsCmd(), newDemoCmd(), newWebhooksCmd(), newDeskCmd(), newLoginCmd(), newSurfaceCmd(), newPolicyCmd(), newInitCmd(), newVersionCmd(), newKeysCmd())
	for _, group := range root.Commands() {
		refuseUnknownSubcommands(group)
	}
	return root
}

// refuseUnknownSubcommands makes a group of commands (approvals, audit, …)
// refuse a word that names none of its commands, X_USAGE, as the root
// refuses one: cobra checks only the root's, and printed the group's help
// with exit 0 for `approvals lsit`. A group named alone prints its help.
func refuseUnknownSubcommands(group *cobra.Command) {
	if !group.HasSubCommands() || group.Runnable() {
		return
	}
	group.Args = cobra.ArbitraryArgs
	group.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return errcode.New(errcode.Usage, fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath()), nil)
	}
	for _, sub := range group.Commands() {
		refuseUnknownSubcommands(sub)
	}
}

// databaseURLFlag binds --database-url, defaulting to $DATABASE_URL.
func databaseURLFlag(flags *pflag.FlagSet, dst *string) {
	secretDefault(flags, dst, "database-url", "DATABASE_URL", "Postgres URL of orangerail's database (default $DATABASE_URL)")
}

// secretDefault binds the string flag name to dst, defaulting to $env,
// whose value help never prints: it says where the default comes from,
// and a database URL's default holds its password, which pflag's
// `(default "…")` would otherwise put on the terminal of anyone who asks
// a command for --help.
func secretDefault(flags *pflag.FlagSet, dst *string, name, env, usage string) {
	flags.StringVar(dst, name, os.Getenv(env), usage)
	flags.Lookup(name).DefValue = ""
}
