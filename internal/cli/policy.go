package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apispec"
	"github.com/orangerail/orangerail/internal/policy/openapi"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Compile an OpenAPI or WSDL description into a reviewable policy and actions",
	}
	cmd.AddCommand(newPolicyCompileCmd(), newPolicyExplainCmd(), newPolicyDiffCmd())
	return cmd
}

func newPolicyCompileCmd() *cobra.Command {
	var (
		service, manifestPath, actionsPath, baseURL, environment string
		include, accept, roles                                   []string
	)
	cmd := &cobra.Command{
		Use:   "compile SPEC --service NAME [-o manifest.json] [--actions actions.yaml --include SELECTOR]",
		Short: "Compile an API description into a policy manifest, and the actions a team chose to serve",
		Long: "compile reads an OpenAPI 2.0, 3.0 or 3.1 document (JSON or YAML; $refs into files beside it\n" +
			"are followed, never the network) or a WSDL 1.1 document, and writes a policy manifest: one\n" +
			"tool per operation, every value with the place it was read from and the rule that made it,\n" +
			"and what could not be demonstrated listed under unresolved. An operation whose fatal finding\n" +
			"stands fails closed; --accept TOOL=REASON records a person's acceptance of one.\n\n" +
			"--actions writes an ontology config (config check accepts it) with the upstream and an action\n" +
			"for each servable operation an --include picks: tag:NAME, operation:ID, method:METHOD (soap\n" +
			"for SOAP operations) or *. An operation not picked is not served.\n\n" +
			"The same input gives the same bytes. Exit status: 0 when written, 2 when it could not run.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			acceptances, err := parseAccept(accept)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("roles") && (len(roles) == 0 || slices.ContainsFunc(roles, func(r string) bool { return strings.TrimSpace(r) == "" })) {
				// --roles '' granted nobody, without a word.
				return errcode.New(errcode.Usage, fmt.Sprintf("--roles %q names an empty role: name each role that may call the written actions", strings.Join(roles, ",")), nil)
			}
			selectors, err := policy.ParseSelectors(include)
			if err != nil {
				return errcode.New(errcode.PolicySelectorInvalid, err.Error(), err)
			}
			if actionsPath == "" && len(selectors) > 0 {
				return errcode.New(errcode.PolicySelectorInvalid, "--include picks what --actions writes: pass --actions FILE too", nil)
			}
			if err := distinctFiles(map[string]string{"the description": args[0], "-o": manifestPath, "--actions": actionsPath}); err != nil {
				return err
			}
			// Reading, compiling and emitting write nothing: a signal
			// stops the command at once, leaving them to the process's exit.
			var (
				m       *policy.Manifest
				data    []byte
				emitted *policy.Emitted
			)
			err = untilDone(cmd.Context(), func() error {
				f, err := readSpec(args[0])
				if err != nil {
					return err
				}
				m, err = policy.Compile(f.Doc, policy.Options{Service: service, File: f.Name, SHA256: f.SHA256, Accept: acceptances})
				switch {
				case errors.Is(err, policy.ErrService):
					return errcode.New(errcode.PolicyServiceInvalid, err.Error(), err)
				case err != nil:
					return errcode.New(errcode.PolicyAcceptInvalid, err.Error(), err)
				}
				if data, err = m.Marshal(); err != nil {
					return err
				}
				if actionsPath == "" {
					return nil
				}
				emitted, err = policy.Emit(m, f.Doc, selectors, policy.EmitOptions{BaseURL: baseURL, Environment: environment, Roles: roles})
				switch {
				case errors.Is(err, policy.ErrSelector):
					return errcode.New(errcode.PolicySelectorInvalid, err.Error(), err)
				case errors.Is(err, policy.ErrBaseURL):
					return errcode.New(errcode.PolicyBaseURLMissing, err.Error(), err)
				case errors.Is(err, policy.ErrTooLarge):
					return errcode.New(errcode.PolicyActionsTooLarge, err.Error(), err)
				}
				return err
			})
			if err != nil {
				return err
			}
			for _, name := range unusedAcceptances(m, acceptances) {
				fmt.Fprintf(cmd.ErrOrStderr(), "policy compile: --accept %s: the tool has no acceptable fatal finding, so there is nothing to accept and the reason is not recorded\n", name)
			}
			// Written only once everything compiled, and the two files
			// together: one that cannot be written leaves the other as it
			// was, never a new manifest beside an old actions file.
			var files []output
			toStdout := manifestPath == "" || manifestPath == "-"
			if !toStdout {
				files = append(files, output{manifestPath, data})
			}
			if emitted != nil {
				files = append(files, output{actionsPath, emitted.YAML})
			}
			if err := writeFiles(files...); err != nil {
				return err
			}
			if toStdout {
				if _, err := cmd.OutOrStdout().Write(data); err != nil {
					return err
				}
			}
			summarize(cmd.ErrOrStderr(), m, manifestPath)
			if emitted != nil {
				w := cmd.ErrOrStderr()
				fmt.Fprintf(w, "%s: %d action(s) written: %s\n", actionsPath, len(emitted.Written), strings.Join(emitted.Written, ", "))
				for _, s := range emitted.Skipped {
					fmt.Fprintf(w, "  not served: %s: %s\n", s.Tool, display.Text(s.Reason))
				}
				for _, n := range emitted.Notes {
					fmt.Fprintf(w, "  note: %s: %s\n", n.Tool, display.Text(n.Reason))
				}
				fmt.Fprintf(w, "Check it with: %s\n", shellJoin([]string{invokedAs(), "config", "check", actionsPath}))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&service, "service", "", "the upstream's name: the deployment's service and the credential variables' prefix (required)")
	fl.StringVarP(&manifestPath, "output", "o", "", "write the manifest to this file (default: standard output)")
	fl.StringVar(&actionsPath, "actions", "", "write the picked operations' actions to this ontology config file")
	fl.StringArrayVar(&include, "include", nil, "pick operations for --actions: tag:NAME, operation:ID, method:METHOD, or * (repeatable, comma-separated)")
	fl.StringArrayVar(&accept, "accept", nil, "TOOL=REASON: a person accepts the tool's acceptable fatal findings (repeatable)")
	fl.StringVar(&baseURL, "base-url", "", "the upstream's URL in --actions (default: the description's first https server)")
	fl.StringVar(&environment, "environment", "production", "the environment the actions file's config serves")
	fl.StringSliceVar(&roles, "roles", nil, "roles that may call every written action (beside its scope)")
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

// readSpec reads a description, classifying its failures.
func readSpec(path string) (*apispec.File, error) {
	f, err := apispec.Read(path)
	switch {
	case errors.Is(err, openapi.ErrNotOpenAPI), errors.Is(err, wsdl.ErrNotWSDL):
		return nil, errcode.New(errcode.PolicySpecUnsupported, err.Error(), err)
	case err != nil:
		return nil, errcode.New(errcode.PolicySpecUnreadable, err.Error(), err)
	}
	return f, nil
}

// parseAccept reads --accept TOOL=REASON values.
func parseAccept(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		tool, reason, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(tool) == "" || strings.TrimSpace(reason) == "" {
			return nil, errcode.New(errcode.PolicyAcceptInvalid, fmt.Sprintf("--accept %q is not TOOL=REASON", v), nil)
		}
		tool = strings.TrimSpace(tool)
		if _, twice := out[tool]; twice {
			// One reason a tool: a second would replace the first unread.
			return nil, errcode.New(errcode.PolicyAcceptInvalid, fmt.Sprintf("--accept names %q twice: give one reason", tool), nil)
		}
		out[tool] = strings.TrimSpace(reason)
	}
	return out, nil
}

// unusedAcceptances names the tools --accept gave a reason for that had
// no acceptable fatal finding to accept: the reason is recorded nowhere.
func unusedAcceptances(m *policy.Manifest, accept map[string]string) []string {
	var unused []string
	for _, name := range slices.Sorted(maps.Keys(accept)) {
		if t := m.Tool(name); t != nil && !slices.ContainsFunc(t.Unresolved, func(u policy.Unresolved) bool { return u.Accepted != "" }) {
			unused = append(unused, name)
		}
	}
	return unused
}

// summarize tells the operator what the manifest holds.
func summarize(w io.Writer, m *policy.Manifest, path string) {
	servable, closed := 0, 0
	for _, t := range m.Tools {
		if t.Status.Value == policy.StatusServable {
			servable++
		} else {
			closed++
		}
	}
	where := "standard output"
	if path != "" && path != "-" {
		where = path
	}
	fmt.Fprintf(w, "%s: %d operation(s) of %s: %d servable, %d fail closed; manifest written to %s\n",
		display.Text(m.Source.File), len(m.Tools), display.Text(m.Source.Title), servable, closed, where)
	if len(m.Problems) > 0 {
		fmt.Fprintf(w, "  %d part(s) of the description could not be read; see problems in the manifest\n", len(m.Problems))
	}
}

// output is a file a command writes, and what it holds.
type output struct {
	path string
	data []byte
}

// writeFile writes data to path as writeFiles does.
func writeFile(path string, data []byte) error { return writeFiles(output{path, data}) }

// writeFiles writes each file through a temporary file beside it, so a
// reader never sees half a file, and puts them in place only once every
// one is written: a file that cannot be written (its directory missing,
// or a directory in its place) leaves the others as they were. A symbolic
// link is written through, to the file it names, and stays a link; a path
// that is no regular file (a device or a pipe: -o /dev/null, /dev/stdout)
// is written to as it is, last — renamed over, as root, /dev/null itself
// became a regular file, and every later writer to it on the machine
// failed.
func writeFiles(files ...output) error {
	var temps, places []string
	var special []output
	defer func() {
		for _, t := range temps {
			os.Remove(t) //nolint:errcheck,gosec // gone after the rename; removed on failure
		}
	}()
	for _, f := range files {
		path := f.path
		if resolved, err := filepath.EvalSymlinks(path); err == nil {
			path = resolved
		}
		// A new file is for review (0644); one replaced keeps the mode its
		// owner gave it: a config kept 0600 was left readable to all.
		perm := fs.FileMode(0o644)
		if info, err := os.Stat(path); err == nil {
			if !info.Mode().IsRegular() {
				if info.IsDir() {
					return &fs.PathError{Op: "write", Path: f.path, Err: syscall.EISDIR}
				}
				special = append(special, output{path, f.data})
				continue
			}
			perm = info.Mode().Perm()
		}
		tmp, err := stage(path, f.data, perm)
		if tmp != "" {
			temps = append(temps, tmp)
		}
		if err != nil {
			return err
		}
		places = append(places, path)
	}
	for i, tmp := range temps {
		if err := os.Rename(tmp, places[i]); err != nil {
			return err
		}
	}
	for _, f := range special {
		if err := writeSpecial(f.path, f.data); err != nil {
			return err
		}
	}
	return nil
}

// stage writes data to a temporary file beside path, mode perm, returning
// its name (also when the write failed, for its removal).
func stage(path string, data []byte, perm fs.FileMode) (string, error) {
	if err := os.MkdirAll(dirOf(path), 0o750); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dirOf(path), ".orangerail-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the write's error is the one reported
		return tmp.Name(), err
	}
	if err := tmp.Close(); err != nil {
		return tmp.Name(), err
	}
	return tmp.Name(), os.Chmod(tmp.Name(), perm)
}

// writeSpecial writes data to a device or a pipe, as it is.
func writeSpecial(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0) //nolint:gosec // G304: the output the operator named
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close() //nolint:errcheck,gosec // the write's error is the one reported
		return err
	}
	return f.Close()
}

// distinctFiles refuses (X_USAGE) two of the files a command reads and
// writes, named by their flags, that are one file — the same path, or two
// names of one existing file — so that no output replaces the input or
// another output. "" and "-" (standard output) name no file.
func distinctFiles(files map[string]string) error {
	flags := slices.Sorted(maps.Keys(files))
	for i, a := range flags {
		for _, b := range flags[i+1:] {
			if sameFile(files[a], files[b]) {
				return errcode.New(errcode.Usage, fmt.Sprintf("%s and %s both name %s: name a file of its own for each", a, b, files[a]), nil)
			}
		}
	}
	return nil
}

// sameFile reports whether a and b name one file.
func sameFile(a, b string) bool {
	if a == "" || a == "-" || b == "" || b == "-" {
		return false
	}
	if absA, err := filepath.Abs(a); err == nil {
		if absB, err := filepath.Abs(b); err == nil && absA == absB {
			return true
		}
	}
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// readManifest reads a manifest file, classifying its failure.
func readManifest(ctx context.Context, path string) (*policy.Manifest, error) {
	data, err := readFile(ctx, path, policy.MaxManifestBytes, "manifest")
	if err != nil {
		return nil, errcode.New(errcode.PolicyManifestInvalid, err.Error(), err)
	}
	m, err := policy.ReadManifest(data)
	if err != nil {
		return nil, errcode.New(errcode.PolicyManifestInvalid, fmt.Sprintf("%s: %v", path, err), err)
	}
	return m, nil
}

func newPolicyExplainCmd() *cobra.Command {
	var manifestPath string
	cmd := &cobra.Command{
		Use:   "explain TOOL --manifest FILE",
		Short: "Print the reasoning behind each value of a tool's policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := readManifest(cmd.Context(), manifestPath)
			if err != nil {
				return err
			}
			t := m.Tool(args[0])
			if t == nil {
				return errcode.New(errcode.PolicyToolUnknown, fmt.Sprintf("%s holds no tool %q", manifestPath, args[0]), nil)
			}
			policy.Explain(cmd.OutOrStdout(), m, t)
			return nil
		},
	}
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "the manifest policy compile wrote (required)")
	_ = cmd.MarkFlagRequired("manifest")
	return cmd
}

func newPolicyDiffCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Show what a new description's manifest changes in the policy",
		Long: "diff compares two manifests tool by tool: a scope widened, an operation turned destructive,\n" +
			"approval dropped, a field no longer masked, an operation added or gone. Changes that grant\n" +
			"or risk more are marked !.\n\n" +
			"Exit status: 0 when nothing widens, 1 when something does (X_POLICY_DIFF_WIDENS), 2 when\n" +
			"it could not run.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := readManifest(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			neu, err := readManifest(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			changes := policy.Diff(old, neu)
			widens := 0
			for _, c := range changes {
				if c.Widens {
					widens++
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if changes == nil {
					changes = []policy.Change{}
				}
				if err := writeJSON(out, map[string]any{"changes": changes, "widens": widens}); err != nil {
					return err
				}
			} else {
				for _, c := range changes {
					mark := " "
					if c.Widens {
						mark = "!"
					}
					field := c.Field
					if field == "" {
						field = "tool"
					}
					fmt.Fprintf(out, "%s %s %s: %s -> %s\n    %s\n", mark, c.Tool, field, display.Text(orNone(c.Old)), display.Text(orNone(c.New)), display.Text(c.Why))
				}
				fmt.Fprintf(out, "%d change(s), %d widen the policy\n", len(changes), widens)
			}
			if widens > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "orangerail: %s: %d change(s) widen the policy; review each marked !\n", errcode.PolicyDiffWidens, widens)
				return errFindings
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
