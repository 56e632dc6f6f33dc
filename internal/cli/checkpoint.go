package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/term"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// The commands of signed checkpoints and proofs (internal/checkpoint):
// checkpoint and prove read the database; check-proof reads none.

// checkpointTenant names the tenant a command is about: --tenant, which
// must be one the login may read (engine.VerifyTenants: an auditor's are
// those granted to it), or the only such tenant.
func checkpointTenant(cmd *cobra.Command, pool *pgxpool.Pool, tenant string) (string, error) {
	if tenant != "" {
		if err := database.ValidateTenantID(tenant); err != nil {
			return "", err
		}
	}
	tenants, listing, err := engine.VerifyTenants(cmd.Context(), pool)
	switch {
	case err != nil:
		return "", err
	case tenant != "":
		return tenant, readable(tenant, tenants, listing)
	case len(tenants) == 0:
		return "", errcode.New(errcode.TenantUnknown, "the database holds no tenant this login may read yet", nil)
	case len(tenants) == 1:
		return tenants[0], nil
	}
	return "", errcode.New(errcode.Usage, fmt.Sprintf("--tenant is required: this login may read %d tenants", len(tenants)), nil)
}

// CheckpointView is a stored checkpoint as `audit checkpoint --json`
// prints it.
type CheckpointView struct {
	Tenant      string         `json:"tenant"`
	Origin      string         `json:"origin"`
	Size        int64          `json:"size"`
	RootHash    checkpoint.Hex `json:"root_hash"`
	KeyID       string         `json:"key_id"`
	VerifierKey string         `json:"verifier_key"`
	SignedAt    time.Time      `json:"signed_at"`
	Note        string         `json:"note"`
}

func newAuditCheckpointCmd() *cobra.Command {
	var url, tenant string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoint [--tenant T]",
		Short: "Print a tenant's latest signed checkpoint of its audit log (a C2SP signed note)",
		Long: "Checkpoint prints the latest checkpoint signed of the tenant's sealed audit log, as the signed\n" +
			"note verifiers check: the origin line (<audit.checkpoint.origin>/<tenant>), the tree size, the\n" +
			"base64 root hash, a blank line and the signatures. Keep it: a consistency proof from it\n" +
			"(`audit prove --from SIZE`) shows later that the log was only appended to.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := openToRead(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			if tenant, err = checkpointTenant(cmd, pool, tenant); err != nil {
				return err
			}
			c, err := engine.LatestCheckpoint(cmd.Context(), pool, tenant)
			if err != nil {
				return err
			}
			// The database checks a stored note's body, not the lines after
			// it: a note holding a control or invisible character is no
			// signed note, and must not reach a terminal as it is.
			if strings.IndexFunc(c.Note, func(r rune) bool { return r != '\n' && display.Unsafe(r) }) >= 0 || !utf8.ValidString(c.Note) {
				return errcode.New(errcode.AuditChainBroken, fmt.Sprintf("tenant %s's checkpoint of size %d is no signed note: it holds a control or invisible character, %s",
					tenant, c.Size, display.Text(c.Note)), nil)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), CheckpointView{Tenant: c.TenantID, Origin: c.Origin, Size: c.Size, RootHash: c.RootHash,
					KeyID: checkpoint.KeyID(c.KeyName, c.KeyHash), VerifierKey: c.VerifierKey, SignedAt: c.SignedAt, Note: c.Note})
			}
			_, err = io.WriteString(cmd.OutOrStdout(), c.Note)
			return err
		},
	}
	databaseURLFlag(cmd.Flags(), &url)
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant (default: the database's only tenant)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checkpoint and its key as JSON")
	return cmd
}

func newAuditProveCmd() *cobra.Command {
	var url, tenant, out string
	var seq, size, from, to int64
	cmd := &cobra.Command{
		Use:   "prove --tenant T (--seq N [--size S] | --from S1 [--to S2])",
		Short: "Write a proof that a record is in a signed checkpoint, or that one checkpoint extends another",
		Long: "Prove writes a proof file (orangerail-proof/v1 JSON, README \"Signed checkpoints and proofs\")\n" +
			"that `audit check-proof` verifies offline, with only the checkpoint key's public key:\n\n" +
			"  --seq N [--size S]    the record of seq N is in the tree of the checkpoint of size S\n" +
			"                        (default: the latest); the file carries the record's exact bytes\n" +
			"  --from S1 [--to S2]   the checkpoint of size S1 names a prefix of the tree of size S2\n" +
			"                        (default: the latest): the log was only appended to in between\n\n" +
			"Sizes are those of stored checkpoints (`audit checkpoint`). A log that no longer makes a\n" +
			"checkpoint's root was rewritten since it was signed: X_AUDIT_CHAIN_BROKEN.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := requireTenant(tenant); err != nil {
				return err
			}
			pool, err := openToRead(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			if tenant, err = checkpointTenant(cmd, pool, tenant); err != nil {
				return err
			}
			var p *checkpoint.Proof
			if cmd.Flags().Changed("seq") {
				p, err = engine.ProveInclusion(ctx, pool, tenant, seq, size)
			} else {
				p, err = engine.ProveConsistency(ctx, pool, tenant, from, to)
			}
			if err != nil {
				return err
			}
			if out == "" {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			// A proof is public.
			if err := writeNew(out, 0o644, func(w io.Writer) error { return writeJSON(w, p) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote the proof to %s.\n", out)
			return nil
		},
	}
	databaseURLFlag(cmd.Flags(), &url)
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant (required)")
	cmd.Flags().Int64Var(&seq, "seq", 0, "prove the record of this seq is in a checkpoint")
	cmd.Flags().Int64Var(&size, "size", 0, "with --seq: the size of the checkpoint to prove against (default: the latest)")
	cmd.Flags().Int64Var(&from, "from", 0, "prove the checkpoint of this size is a prefix of a later one")
	cmd.Flags().Int64Var(&to, "to", 0, "with --from: the size of the later checkpoint (default: the latest)")
	cmd.Flags().StringVar(&out, "out", "", "write the proof to this new file (default: stdout)")
	cmd.MarkFlagsOneRequired("seq", "from")
	cmd.MarkFlagsMutuallyExclusive("seq", "from")
	cmd.MarkFlagsMutuallyExclusive("size", "from")
	cmd.MarkFlagsMutuallyExclusive("seq", "to")
	return cmd
}

func newAuditCheckProofCmd() *cobra.Command {
	var keys, kept []string
	var keysFile, origin string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check-proof --key PUBKEY [--key OLDKEY ...] [FILE ...]",
		Short: "Verify proof files offline, with the checkpoint keys' public keys and no database",
		Long: "Check-proof verifies each proof file (stdin when none, or -; named none on a terminal, it\n" +
			"says on stderr that it reads one, to be ended with Ctrl-D) that `audit prove` or\n" +
			"/api/v1/audit/proof/... wrote: its checkpoint notes are signed by one of the given public keys\n" +
			"(give the old ones too after a key rotation), and the proof holds against their root hashes.\n" +
			"It reads no database. --checkpoint names checkpoints you kept (signed notes): a proof's\n" +
			"checkpoint of the same log and size must have the same root, and every proof must be tied\n" +
			"to a kept checkpoint — its checkpoint is one, or a consistency proof given beside it leads\n" +
			"from one to it.\n\n" +
			"Exit status: 0 when every proof verifies, 1 when one does not, 2 when checking could not run.",
		RunE: func(cmd *cobra.Command, args []string) error {
			known, err := checkpointKeys(cmd.Context(), keys, keysFile)
			if err != nil {
				return err
			}
			opts := checkpoint.CheckOptions{Origin: origin}
			for _, path := range kept {
				text, err := readFile(cmd.Context(), path, checkpoint.MaxProofBytes, "checkpoint")
				if err != nil {
					return err
				}
				// A note ends in one newline; a tool that saves it (psql -At)
				// may add another, which is no part of what was signed.
				c, _, err := checkpoint.OpenNote(strings.TrimRight(string(text), "\n")+"\n", known)
				if err != nil {
					return fmt.Errorf("--checkpoint %s: %w", path, err)
				}
				opts.Kept = append(opts.Kept, c)
			}
			if waitsOnTerminal(args, cmd.InOrStdin(), term.IsTerminal) {
				fmt.Fprintln(cmd.ErrOrStderr(), stdinHint)
			}
			if len(args) == 0 {
				args = []string{"-"}
			}
			type outcome struct {
				File   string             `json:"file"`
				OK     bool               `json:"ok"`
				Result *checkpoint.Result `json:"result,omitempty"`
				Code   errcode.Code       `json:"code,omitempty"`
				Error  string             `json:"error,omitempty"`
			}
			results, errs := make([]*checkpoint.Result, len(args)), make([]error, len(args))
			unreadable := 0
			var stopped error
			for i, path := range args {
				res, err := checkProofFile(cmd, path, known, opts)
				if cause := cmd.Context().Err(); cause != nil && errors.Is(err, cause) {
					// Asked to stop: no file from this one on is checked,
					// but those checked before it are said, so that a
					// long run stopped at its last file loses nothing.
					stopped = err
					results, errs, args = results[:i], errs[:i], args[:i]
					break
				}
				var coded *errcode.Error
				if err != nil && !errors.As(err, &coded) {
					// Said on its own line as every other file's outcome;
					// checking it could not run, so the run exits 2.
					err, unreadable = errcode.New(errcode.FileUnusable, err.Error(), err), unreadable+1
				}
				results[i], errs[i] = res, err
			}
			// With checkpoints kept, a proof must be tied to one of them
			// (by its checkpoint, or through the consistency proofs given
			// beside it): else it proves nothing about the log the
			// auditor saw.
			if len(opts.Kept) > 0 {
				for i, ok := range checkpoint.Anchored(results, opts.Kept) {
					if errs[i] == nil && !ok {
						errs[i] = checkpoint.ErrUnanchored(results[i])
						if stopped != nil {
							// A file not read may hold the consistency
							// proof that ties it: not judged either way.
							errs[i] = errcode.New(errcode.Interrupted, "not tied to a kept checkpoint by the files read before the signal; the files after it were not read", nil)
						}
					}
				}
			}
			var outcomes []outcome
			failed := false
			for i, path := range args {
				res, err := results[i], errs[i]
				o := outcome{File: path, OK: err == nil, Result: res}
				if err != nil {
					var coded *errcode.Error
					errors.As(err, &coded)
					failed, o.Code, o.Error, o.Result = true, coded.Code, coded.Msg, nil
				}
				outcomes = append(outcomes, o)
				if !asJSON {
					printOutcome(cmd.OutOrStdout(), path, res, err)
				}
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), outcomes); err != nil {
					return err
				}
			}
			if stopped != nil {
				return stopped
			}
			if unreadable > 0 {
				return errcode.New(errcode.FileUnusable, fmt.Sprintf("%d of %d file(s) could not be read, so were not checked", unreadable, len(args)), nil)
			}
			if failed {
				return errFindings
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "a checkpoint key's public key, <name>+<hash>+<keydata> (repeat for old keys)")
	cmd.Flags().StringVar(&keysFile, "keys-file", "", "a file of public keys, one a line (# comments)")
	cmd.Flags().StringVar(&origin, "origin", "", "require the checkpoints to be of this log (<origin>/<tenant>)")
	cmd.Flags().StringArrayVar(&kept, "checkpoint", nil, "a signed checkpoint you kept (a file): the proof must agree with it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcomes as JSON")
	return cmd
}

// stdinHint is what check-proof says before it reads a proof from a
// terminal, where it would otherwise wait in silence.
const stdinHint = "reading a proof from standard input; end with Ctrl-D, or name a FILE"

// waitsOnTerminal reports whether check-proof, given args, is about to
// read standard input (in) from a terminal (terminal, given its file
// descriptor): named no FILE, it reads standard input, and on a terminal
// it would wait silently for a person who may not know it does. Named -,
// it reads it as asked; piped or redirected, input comes by itself.
func waitsOnTerminal(args []string, in io.Reader, terminal func(fd int) bool) bool {
	if len(args) != 0 {
		return false
	}
	f, ok := in.(*os.File)
	return ok && terminal(int(f.Fd()))
}

// checkProofFile checks one proof file, "-" being stdin, read while the
// command lasts (a FIFO or a pipe no one writes to stops at the first
// signal) and bounded as a proof is. An error that is not coded means the
// file could not be read.
func checkProofFile(cmd *cobra.Command, path string, known note.Verifiers, opts checkpoint.CheckOptions) (*checkpoint.Result, error) {
	if path == "-" {
		var res *checkpoint.Result
		err := untilDone(cmd.Context(), func() (err error) {
			res, err = checkpoint.Check(cmd.InOrStdin(), known, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	proof, err := readFile(cmd.Context(), path, checkpoint.MaxProofBytes, "proof")
	if err != nil {
		return nil, err
	}
	return checkpoint.Check(bytes.NewReader(proof), known, opts)
}

func printOutcome(w io.Writer, path string, res *checkpoint.Result, err error) {
	// A proof file's name is whoever handed it over's, as its contents are:
	// a newline or an escape in it must not forge or hide an outcome.
	path = display.Text(path)
	if coded := (*errcode.Error)(nil); errors.As(err, &coded) && coded.Code == errcode.Interrupted {
		fmt.Fprintf(w, "%s: NOT JUDGED: %s\n", path, display.Text(err.Error()))
		return
	}
	if err != nil {
		fmt.Fprintf(w, "%s: FAILED: %s\n", path, display.Text(err.Error()))
		return
	}
	what := fmt.Sprintf("record %d is in the tree of size %d", res.Seq, res.Size)
	if res.Kind == checkpoint.KindConsistency {
		what = fmt.Sprintf("the tree of size %d is a prefix of the tree of size %d", res.OldSize, res.Size)
	}
	fmt.Fprintf(w, "%s: OK: %s of %s, signed by %s\n", path, what, display.Text(res.Origin), strings.Join(res.Keys, ", "))
}

// maxKeysFileBytes bounds a --keys-file: thousands of keys, a line each.
const maxKeysFileBytes = 1 << 20

// checkpointKeys returns the checkpoint public keys given by --key (keys)
// and --keys-file (keysFile, when set), as notes are checked against them:
// none at all is refused (X_CHECKPOINT_KEY_INVALID).
func checkpointKeys(ctx context.Context, keys []string, keysFile string) (note.Verifiers, error) {
	if keysFile != "" {
		more, err := readKeyLines(ctx, keysFile)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	return checkpoint.Verifiers(keys)
}

// readKeyLines reads public keys, one a line; blank lines and lines
// beginning # are skipped.
func readKeyLines(ctx context.Context, path string) ([]string, error) {
	data, err := readFile(ctx, path, maxKeysFileBytes, "keys file")
	if err != nil {
		return nil, err
	}
	var keys []string
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys, s.Err()
}

func newAuditCheckpointKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint-key",
		Short: "Make the Ed25519 key that signs audit checkpoints",
	}
	var name, out string
	generate := &cobra.Command{
		Use:   "generate --name NAME --out FILE",
		Short: "Write a new signer key to FILE and print its public key",
		Long: "Generate makes an Ed25519 signed-note key pair. The private signer key (PRIVATE+KEY+...) is\n" +
			"written to FILE, readable by its owner only: name it in audit.checkpoint.key_file, or put its\n" +
			"text in the variable audit.checkpoint.key_env names. The public key is printed: give it to\n" +
			"whoever checks proofs (`audit check-proof --key`). To rotate, generate another key, serve with\n" +
			"it, and keep publishing the old public key: checkpoints keep the key that signed them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			skey, vkey, err := checkpoint.GenerateKey(name)
			if err != nil {
				return err
			}
			if err := writeNew(out, 0o600, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, skey)
				return err
			}); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return nil
		},
	}
	generate.Flags().StringVar(&name, "name", "", "the key's name, e.g. the deployment's host: audit.example.com (required)")
	generate.Flags().StringVar(&out, "out", "", "the new file the private key is written to (required)")
	_ = generate.MarkFlagRequired("name")
	_ = generate.MarkFlagRequired("out")
	cmd.AddCommand(generate)
	return cmd
}
