package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

// carrierSpec is the example carrier's OpenAPI document, the README's
// policy compile example.
const carrierSpec = "../../examples/orders/carrier/openapi.json"

// TestPolicyCommands runs the README's policy commands: compile writes a
// manifest and the picked actions, config check accepts them, explain
// gives each value its rule and source, diff of a manifest against itself
// finds nothing; compiled twice, the bytes are the same.
func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifest, actions := filepath.Join(dir, "out", "shipping.manifest.json"), filepath.Join(dir, "out", "shipping.yaml")
	args := []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", manifest, "--actions", actions,
		"--include", "operation:createLabel,operation:getLabel", "--accept", "createLabel=the carrier key only makes and reads labels; each label waits for a person"}
	code, stdout, stderr := cli(t, args...)
	if code != 0 || stdout != "" {
		t.Fatalf("compile: %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"4 operation(s) of Example carrier: 4 servable, 0 fail closed", "2 action(s) written: createLabel, getLabel", "orangerail config check " + actions} {
		if !strings.Contains(stderr, want) {
			t.Errorf("compile's stderr lacks %q:\n%s", want, stderr)
		}
	}
	first, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	firstActions, _ := os.ReadFile(actions)
	if code, stdout, stderr := cli(t, "config", "check", actions); code != 0 || !strings.Contains(stdout, "0 problem(s)") {
		t.Fatalf("config check: %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := cli(t, args...); code != 0 {
		t.Fatalf("compile again: %s", stderr)
	}
	again, _ := os.ReadFile(manifest)
	againActions, _ := os.ReadFile(actions)
	if string(again) != string(first) || string(againActions) != string(firstActions) {
		t.Fatal("two compiles of one document wrote different bytes")
	}

	code, stdout, stderr = cli(t, "policy", "explain", "createLabel", "--manifest", manifest)
	if code != 0 {
		t.Fatalf("explain: %s", stderr)
	}
	for _, want := range []string{"createLabel: POST /labels, from openapi.json (/paths/~1labels/post)", "risk: write", "approval: required",
		"retry: with_idempotency_key", "from:    /components/parameters/IdempotencyKey", "required_schemes: apiKey (header X-Api-Key, from $SHIPPING_APIKEY_CREDENTIAL)",
		"accepted scopeless", `accepted: the carrier key only makes and reads labels`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("explain lacks %q:\n%s", want, stdout)
		}
	}
	if code, stdout, _ := cli(t, "policy", "diff", manifest, manifest); code != 0 || !strings.Contains(stdout, "0 change(s), 0 widen the policy") {
		t.Fatalf("diff of a manifest with itself: %d %s", code, stdout)
	}

	// Without --accept, createLabel fails closed and is not written; the
	// diff from the accepted manifest names it, and nothing widens.
	closed := filepath.Join(dir, "closed.json")
	if code, _, stderr := cli(t, "policy", "compile", carrierSpec, "--service", "shipping", "-o", closed); code != 0 || !strings.Contains(stderr, "3 servable, 1 fail closed") {
		t.Fatalf("compile without --accept: %d %s", code, stderr)
	}
	code, stdout, _ = cli(t, "policy", "diff", manifest, closed, "--json")
	var d struct {
		Changes []struct{ Tool, Field, Old, New string }
		Widens  int
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || code != 0 || d.Widens != 0 || len(d.Changes) == 0 || d.Changes[0].Tool != "createLabel" {
		t.Fatalf("diff accepted → closed: %d %s", code, stdout)
	}
	// The other way, a tool newly served widens: exit 1 and the code.
	code, stdout, stderr = cli(t, "policy", "diff", closed, manifest)
	if code != exitFindings || !strings.Contains(stdout, "! createLabel status: fails_closed -> servable") || !strings.Contains(stderr, string(errcode.PolicyDiffWidens)) {
		t.Fatalf("diff closed → accepted: %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestPolicyRefusals: every bad input is refused with its code, one line
// and a fix, and writes nothing.
func TestPolicyRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notSpec := write("not.yaml", "hello: world\n")
	garbage := write("garbage.json", "{\"openapi\": ")
	oldSwagger := write("old.json", `{"swagger": "1.2"}`)
	noServer := write("noserver.yaml", "openapi: 3.0.0\ninfo: {title: x, version: '1'}\npaths:\n  /x:\n    get: {operationId: getX, responses: {'200': {description: ok}}}\n")
	out := filepath.Join(dir, "m.json")
	good := filepath.Join(dir, "good.json")
	if code, _, stderr := cli(t, "policy", "compile", carrierSpec, "--service", "shipping", "-o", good); code != 0 {
		t.Fatal(stderr)
	}
	bad := write("bad.json", strings.Replace(mustRead(t, good), `"risk": {
        "value": "read"`, `"risk": {
        "value": "destructive"`, 1))
	cases := []struct {
		name string
		args []string
		code errcode.Code
	}{
		{"a missing file", []string{"policy", "compile", filepath.Join(dir, "none.yaml"), "--service", "x", "-o", out}, errcode.PolicySpecUnreadable},
		{"not JSON", []string{"policy", "compile", garbage, "--service", "x", "-o", out}, errcode.PolicySpecUnreadable},
		{"not a description", []string{"policy", "compile", notSpec, "--service", "x", "-o", out}, errcode.PolicySpecUnsupported},
		{"swagger 1.2", []string{"policy", "compile", oldSwagger, "--service", "x", "-o", out}, errcode.PolicySpecUnsupported},
		{"a service with capitals", []string{"policy", "compile", carrierSpec, "--service", "Shipping", "-o", out}, errcode.PolicyServiceInvalid},
		{"--accept without a reason", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--accept", "createLabel"}, errcode.PolicyAcceptInvalid},
		{"--accept of no tool", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--accept", "nope=why"}, errcode.PolicyAcceptInvalid},
		{"--roles of an empty role", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--roles", ""}, errcode.Usage},
		{"--accept of a tool twice", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--accept", "createLabel=one", "--accept", "createLabel=two"}, errcode.PolicyAcceptInvalid},
		{"--actions without --include", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", filepath.Join(dir, "a.yaml")}, errcode.PolicySelectorInvalid},
		{"--include without --actions", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--include", "*"}, errcode.PolicySelectorInvalid},
		{"a selector of no kind", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", filepath.Join(dir, "a.yaml"), "--include", "verb:POST"}, errcode.PolicySelectorInvalid},
		{"a selector that picks nothing", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", filepath.Join(dir, "a.yaml"), "--include", "tag:nothing"}, errcode.PolicySelectorInvalid},
		{"no server to call", []string{"policy", "compile", noServer, "--service", "x", "-o", out, "--actions", filepath.Join(dir, "a.yaml"), "--include", "*"}, errcode.PolicyBaseURLMissing},
		{"a base URL off loopback over http", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", filepath.Join(dir, "a.yaml"), "--include", "*", "--base-url", "http://api.example.com"}, errcode.PolicyBaseURLMissing},
		{"explain of no manifest", []string{"policy", "explain", "createLabel", "--manifest", filepath.Join(dir, "none.json")}, errcode.PolicyManifestInvalid},
		{"explain of a description", []string{"policy", "explain", "createLabel", "--manifest", carrierSpec}, errcode.PolicyManifestInvalid},
		// Read within a bound: a device never ends.
		{"explain of /dev/zero", []string{"policy", "explain", "createLabel", "--manifest", "/dev/zero"}, errcode.PolicyManifestInvalid},
		{"diff of /dev/zero", []string{"policy", "diff", good, "/dev/zero"}, errcode.PolicyManifestInvalid},
		{"explain of a manifest that contradicts itself", []string{"policy", "explain", "getLabel", "--manifest", bad}, errcode.PolicyManifestInvalid},
		{"explain of no tool", []string{"policy", "explain", "deleteEverything", "--manifest", good}, errcode.PolicyToolUnknown},
		{"diff of a broken manifest", []string{"policy", "diff", good, garbage}, errcode.PolicyManifestInvalid},
		// One file for two roles: the actions file would replace the
		// manifest, an output the description.
		{"-o and --actions one file", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", out, "--include", "*"}, errcode.Usage},
		{"-o and --actions one file, spelled apart", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", filepath.Join(dir, ".", "m.json"), "--include", "*"}, errcode.Usage},
		{"-o the description", []string{"policy", "compile", noServer, "--service", "x", "-o", noServer}, errcode.Usage},
		{"--actions the description", []string{"policy", "compile", noServer, "--service", "x", "-o", out, "--actions", noServer, "--include", "*"}, errcode.Usage},
		// The manifest is not written when the actions file cannot be.
		{"--actions a directory", []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", dir, "--include", "*"}, errcode.FileUnusable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, tc.args...)
			if code != exitError || stdout != "" {
				t.Fatalf("exit %d, stdout %q", code, stdout)
			}
			oneLine(t, stderr, string(tc.code))
			for _, p := range []string{out, filepath.Join(dir, "a.yaml")} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("%s was written", p)
				}
			}
		})
	}
	if got := mustRead(t, noServer); !strings.HasPrefix(got, "openapi: 3.0.0\n") {
		t.Fatalf("the description was replaced: %.80s", got)
	}
	// An existing manifest is left as it was when the actions file beside
	// it cannot be written: never a new manifest beside an old actions
	// file.
	if code, _, stderr := cli(t, "policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--accept", "createLabel=a person looked"); code != exitOK {
		t.Fatal(stderr)
	}
	before := mustRead(t, out)
	if code, _, stderr := cli(t, "policy", "compile", carrierSpec, "--service", "shipping", "-o", out, "--actions", dir, "--include", "*"); code != exitError || mustRead(t, out) != before {
		t.Fatalf("exit %d (%s); the manifest changed: %v", code, stderr, mustRead(t, out) != before)
	}
	// A reason for a tool with nothing to accept is said to go unrecorded,
	// not dropped without a word.
	code, _, stderr := cli(t, "policy", "compile", carrierSpec, "--service", "shipping", "-o", filepath.Join(dir, "m2.json"), "--accept", "getLabel=why not")
	if code != exitOK || !strings.Contains(stderr, "--accept getLabel: the tool has no acceptable fatal finding") {
		t.Fatalf("an acceptance of nothing: exit %d %q", code, stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPolicyCompileStopsAtASignal: a compile the first signal stops (its
// context ended) exits X_INTERRUPTED, one line, and writes nothing; the
// phases that only read and compute are left, not waited for.
func TestPolicyCompileStopsAtASignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifest, actions := filepath.Join(dir, "m.json"), filepath.Join(dir, "a.yaml")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var stdout, stderr bytes.Buffer
	code := Run(ctx, []string{"policy", "compile", carrierSpec, "--service", "shipping", "-o", manifest, "--actions", actions, "--include", "*"}, &stdout, &stderr)
	if code != exitError || stdout.Len() != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	oneLine(t, stderr.String(), string(errcode.Interrupted))
	for _, p := range []string{manifest, actions} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want nothing written", p, err)
		}
	}

	// A phase still running when the context ends is not waited for.
	running, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ctx, cancel = context.WithCancel(t.Context())
	go func() { <-running; cancel() }()
	err := untilDone(ctx, func() error { close(running); <-release; return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("untilDone = %v, want the context's end", err)
	}
}
