package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/examples/orders/carrier"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/ontology"
)

// demoStateDir holds the demo's private cluster and demo.json.
const demoStateDir = ".orangerail"

// demoCheckpointInterval is how often the demo signs audit checkpoints.
const demoCheckpointInterval = 5 * time.Second

// demoConfig is the example ontology the demo serves.
const demoConfig = "examples/orders/orangerail.yaml"

// demoFacts is what the demo writes to .orangerail/demo.json for scripts.
type demoFacts struct {
	// Tokens are development tokens: {"agent": {tenant: token}, "approver": {…}, "auditor": {…}}.
	Tokens map[string]map[string]string `json:"tokens,omitempty"`
	// Issuer is the development OIDC issuer's URL.
	Issuer string `json:"issuer,omitempty"`
	// DeskURL is the approvers' web desk; Logins are the issuer's accounts
	// that sign in to it: {"approver": {tenant: {"username","password"}}}.
	DeskURL string `json:"desk_url,omitempty"`
	// ServerURL is the deployment's public URL, which the approvals
	// commands take as --server.
	ServerURL string                          `json:"server_url,omitempty"`
	Logins    map[string]map[string]demoLogin `json:"logins,omitempty"`
	// MCPURL is the Streamable HTTP endpoint under the demo's public URL;
	// null with --prepare-only, which serves nothing.
	MCPURL         *string  `json:"mcp_url"`
	DatabaseURL    string   `json:"database_url"`
	DatabaseSource string   `json:"database_source"`
	Config         string   `json:"config"`
	StdioCommand   []string `json:"stdio_command"`
	// StdioEnv is the environment stdio_command runs in, beside the
	// caller's: where the shipping upstream's API key is read from (the
	// file, never the key).
	StdioEnv map[string]string `json:"stdio_env,omitempty"`
	Self     string            `json:"orangerail"`
	// CarrierURL is the example's shipping upstream, served by the demo on
	// loopback (its OpenAPI document at /openapi.json); its API key is
	// never written here.
	CarrierURL string `json:"carrier_url,omitempty"`
}

// demoLogin is one account at the development issuer.
type demoLogin struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// seedExample creates and fills the example's tables, then checks the
// example config against them.
func seedExample(ctx context.Context, url string) error {
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		return err
	}
	_, problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

func newDemoCmd() *cobra.Command {
	var (
		prepareOnly bool
		listenAddr  string
		publicURL   string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the local demo (what `make run` starts): a database, the example, and how to connect",
		Long: "Find or start a database for the demo: $DATABASE_URL if set; else the orangerail_demo\n" +
			"database on a Postgres at 127.0.0.1:5432; else a private cluster under .orangerail/ started\n" +
			"from the local Postgres binaries. Migrate it, seed the orders example, print how an MCP client\n" +
			"connects and how to approve, write the same facts to .orangerail/demo.json, and serve MCP\n" +
			"over HTTP until interrupted, with an embedded DEVELOPMENT-ONLY OIDC issuer whose tokens it\n" +
			"prints. For a developer's machine only: `serve` never starts that issuer.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			found, err := devdb.Find(ctx, devdb.Options{
				Env: os.Getenv("DATABASE_URL"),
				Dir: filepath.Join(demoStateDir, "postgres"),
				Logf: func(format string, args ...any) {
					fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
				},
			})
			if err != nil {
				return err
			}
			if found.StopFunc != nil && !prepareOnly {
				defer func() {
					if err := found.StopFunc(); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "stopping the private cluster: %v\n", err)
					}
				}()
			}
			if err := database.MigrateUp(ctx, found.URL); err != nil {
				return err
			}
			if err := seedExample(ctx, found.URL); err != nil {
				return fmt.Errorf("seed the example: %w", err)
			}
			facts, err := newDemoFacts(found)
			if err != nil {
				return err
			}
			factsPath := filepath.Join(demoStateDir, "demo.json")
			if prepareOnly {
				if err := writeFacts(factsPath, facts); err != nil {
					return err
				}
				printDemo(out, found, facts, factsPath)
				return nil
			}
			return serveDemo(ctx, out, found, facts, factsPath, listenAddr, publicURL)
		},
	}
	cmd.Flags().StringVar(&listenAddr, "listen", ontology.HTTPListenDefault, "where the demo serves MCP over HTTP")
	cmd.Flags().StringVar(&publicURL, "public-url", "", "the URL clients reach the demo at (default http://<the bound loopback address>; required off loopback)")
	cmd.Flags().BoolVar(&prepareOnly, "prepare-only", false, "prepare the database and the facts, then exit (for scripts)")
	return cmd
}

// The demo's development identity: an agent of tenant acme who may call
// every action of the example.
var demoIdentity = []string{"--dev-tenant", "acme", "--dev-subject", "demo-agent", "--dev-roles", "support", "--dev-scopes", "orders:write"}

func newDemoFacts(found *devdb.Database) (*demoFacts, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The repository's copy when run from a checkout; else the embedded one,
	// written beside the demo's other state.
	config := demoConfig
	if _, err := os.Stat(config); err != nil {
		config = filepath.Join(demoStateDir, "orangerail.yaml")
		if err := os.MkdirAll(demoStateDir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(config, orders.Config, 0o600); err != nil {
			return nil, err
		}
	}
	if config, err = filepath.Abs(config); err != nil {
		return nil, err
	}
	keyFile, err := filepath.Abs(filepath.Join(demoStateDir, "secret.key"))
	if err != nil {
		return nil, err
	}
	stdio := append([]string{self, "serve", "--stdio", "--config", config, "--database-url", found.URL, "--key-file", keyFile}, demoIdentity...)
	return &demoFacts{DatabaseURL: found.URL, DatabaseSource: string(found.Source), Config: config, StdioCommand: stdio, Self: self}, nil
}

func writeFacts(path string, facts *demoFacts) error {
	b, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

func printDemo(out io.Writer, found *devdb.Database, facts *demoFacts, factsPath string) {
	fmt.Fprintf(out, "orangerail demo\n  database: %s (%s), migrated\n", database.RedactURL(found.URL), found.Source)
	if found.Dir != "" {
		fmt.Fprintf(out, "  cluster:  %s (stopped when the demo stops)\n", found.Dir)
	}
	fmt.Fprintf(out, "  config:   %s (seeded: tenants acme and globex)\n  facts:    %s\n\n", facts.Config, factsPath)
	if facts.MCPURL != nil {
		fmt.Fprintf(out, "MCP over Streamable HTTP: %s\n  development issuer (DEV ONLY): %s\n", *facts.MCPURL, facts.Issuer)
		for _, role := range []string{"agent", "approver", "auditor"} {
			for _, tenant := range slices.Sorted(maps.Keys(facts.Tokens[role])) {
				fmt.Fprintf(out, "  %s token, tenant %s:\n    %s\n", role, tenant, facts.Tokens[role][tenant])
			}
		}
		fmt.Fprintf(out, "With Claude Code:\n  claude mcp add --transport http orangerail %s --header 'Authorization: Bearer %s'\n\n",
			*facts.MCPURL, facts.Tokens["agent"]["acme"])
	}
	if facts.CarrierURL != "" && facts.MCPURL != nil {
		printCarrier(out, facts)
	}
	// The development issuer listens on loopback: a browser elsewhere
	// cannot sign in to the desk. Over plain http off loopback it is not
	// served at all (serveDemo).
	serverURL, err := url.Parse(facts.ServerURL)
	if err != nil {
		serverURL = &url.URL{} // none: the demo made it, from a URL it checked
	}
	switch {
	case facts.DeskURL != "" && ontology.LoopbackHost(serverURL.Hostname()):
		fmt.Fprintf(out, "The approvers' desk (sign in at the development issuer): %s\n", facts.DeskURL)
	case facts.DeskURL != "":
		fmt.Fprintf(out, "The approvers' desk (sign in at the development issuer, which listens on this machine's loopback: "+
			"from a browser on this machine only): %s\n", facts.DeskURL)
	case ontology.PlainOffLoopback(serverURL):
		fmt.Fprintf(out, "No approvers' desk at %s: it signs people in with a session cookie, which must travel over https off loopback. "+
			"Decide with the commands below, as one of these logins, or give the demo an https public URL (a TLS proxy in front).\n", facts.ServerURL)
	}
	if len(facts.Logins["approver"]) > 0 {
		for _, tenant := range slices.Sorted(maps.Keys(facts.Logins["approver"])) {
			l := facts.Logins["approver"][tenant]
			fmt.Fprintf(out, "  approver, tenant %s: username %s  password %s\n", tenant, l.Username, l.Password)
		}
		fmt.Fprintln(out)
	}
	// A URL with a password is not printed: the commands read it from the
	// environment instead (demo.json, readable by its owner only, has it).
	urlArg := demoURLArg(facts.DatabaseURL)
	if database.HasPassword(facts.DatabaseURL) {
		fmt.Fprintln(out, "The database URL holds a password, so the commands below read it from $DATABASE_URL.")
	}
	stdio := shellJoin(facts.StdioCommand)
	if i := slices.Index(facts.StdioCommand, "--database-url"); i >= 0 && i+1 < len(facts.StdioCommand) {
		stdio = shellJoin(facts.StdioCommand[:i+1]) + " " + urlArg + " " + shellJoin(facts.StdioCommand[i+2:])
	}
	var env, claudeEnv []string
	for _, k := range slices.Sorted(maps.Keys(facts.StdioEnv)) {
		kv := k + "=" + shellJoin([]string{facts.StdioEnv[k]})
		env = append(env, kv)
		claudeEnv = append(claudeEnv, "-e", kv)
	}
	fmt.Fprintf(out, "Or connect over stdio as a development identity:\n  %s\n", strings.Join(append(env, stdio), " "))
	fmt.Fprintf(out, "With Claude Code:\n  %s\n\n", strings.Join(append(append([]string{"claude mcp add orangerail-stdio"}, claudeEnv...), "--", stdio), " "))
	self := shellJoin([]string{facts.Self})
	if facts.ServerURL != "" {
		server := shellJoin([]string{facts.ServerURL})
		// Served over plain http off loopback (--public-url), the commands
		// must say that they send the token in the clear anyway.
		if ontology.PlainOffLoopback(serverURL) {
			server += " --plain-http"
		}
		fmt.Fprintf(out, "Decide what the agent stages from the command line, as a person (the approver login above):\n"+
			"  %s login --issuer %s\n  %s approvals list --server %s\n  %s approvals show ID --server %s\n"+
			"  %s approvals approve ID --server %s --digest DIGEST\n\n",
			self, shellJoin([]string{facts.Issuer}), self, server, self, server, self, server)
	}
	fmt.Fprintf(out, "Only if the server cannot be reached: the database owner decides around it, and audit verify reports it:\n"+
		"  %s approvals list --break-glass --reason WHY --tenant acme --config %s --database-url %s\n\n",
		self, shellJoin([]string{facts.Config}), urlArg)
	fmt.Fprintf(out, "Verify the audit log:\n  %s audit verify --database-url %s\n\n", self, urlArg)
}

// demoURLArg is the demo's database URL as the commands it prints give
// it: quoted for the shell, or "$DATABASE_URL" when it holds a password,
// which is never printed.
func demoURLArg(dbURL string) string {
	if database.HasPassword(dbURL) {
		return `"$DATABASE_URL"`
	}
	return shellJoin([]string{dbURL})
}

// printCarrier prints the demo's carrier and, runnable as printed, the
// agent's call that stages a return label and its poll once a person has
// approved it.
func printCarrier(out io.Writer, facts *demoFacts) {
	fmt.Fprintf(out, "The shipping upstream, a carrier the demo serves (DEV ONLY): %s\n  its OpenAPI document: %s/openapi.json\n"+
		"  its API key is placed by the upstream's scheme from $%s, which the demo set for this run\n",
		facts.CarrierURL, facts.CarrierURL, demoCarrierEnv)
	call := func(id int, tool string, arguments map[string]any) string {
		body, _ := json.Marshal(struct {
			JSONRPC string         `json:"jsonrpc"`
			ID      int            `json:"id"`
			Method  string         `json:"method"`
			Params  map[string]any `json:"params"`
		}{"2.0", id, "tools/call", map[string]any{"name": tool, "arguments": arguments}})
		return shellJoin([]string{"curl", "-sS", *facts.MCPURL, "-H", "Authorization: Bearer " + facts.Tokens["agent"]["acme"],
			"-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream", "--data", string(body)})
	}
	fmt.Fprintf(out, "An agent of acme asks for a return label (create_return_label, which needs a person's approval):\n  %s\n"+
		"Once a person has approved its approvalId (the commands below, or the desk), the agent's poll calls the carrier:\n  %s\n\n",
		call(1, "create_return_label", map[string]any{"order_id": "o-1003", "reason": "arrived damaged", "weight_grams": 1200}),
		call(2, "check_approval", map[string]any{"approvalId": "ID"}))
}

// The upstream the demo serves a carrier for, and the environment whose
// base URL it points at that carrier.
const (
	demoUpstream    = "shipping"
	demoEnvironment = "demo"
)

// demoCarrierEnv is where the shipping upstream's API key is read from.
var demoCarrierEnv = ontology.CredentialEnv(demoUpstream, "key")

// startCarrier serves the example's carrier on a loopback port of its own
// and returns its URL and API key. The key is $SHIPPING_KEY_CREDENTIAL
// when set, else one made for this run and set there: the runtime then
// places it exactly as it would a production credential, by the
// upstream's scheme.
func startCarrier(ctx context.Context) (url, key string, stop func(), err error) {
	key = os.Getenv(demoCarrierEnv)
	if key == "" {
		secret := make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return "", "", nil, err
		}
		key = hex.EncodeToString(secret)
		if err := os.Setenv(demoCarrierEnv, key); err != nil {
			return "", "", nil, err
		}
	}
	c, err := carrier.New(key)
	if err != nil {
		return "", "", nil, err
	}
	ln, err := app.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), key, func() { _ = srv.Close() }, nil
}

// demoConfigFor is the example config as the demo serves it: the shipping
// upstream's base_urls.demo is the carrier the demo bound, and nothing
// else differs from the file.
func demoConfigFor(carrierURL string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(orders.Config, &doc); err != nil {
		return nil, err
	}
	node := &doc
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	for _, key := range []string{"upstreams", demoUpstream, "base_urls", demoEnvironment} {
		node = ontology.MappingValue(node, key)
		if node == nil {
			return nil, fmt.Errorf("the example config has no upstreams.%s.base_urls.%s", demoUpstream, demoEnvironment)
		}
	}
	node.SetString(carrierURL)
	return yaml.Marshal(&doc)
}

// stdioReachesCarrier makes the stdio command the demo prints call the
// carrier it serves, as its HTTP server does: the config it names is the
// one the demo serves, written beside the demo's other state (the
// example's own names another port), and its environment names a file
// holding the carrier's key, readable by its owner only. Without them a
// create_return_label staged over stdio and approved would fail at the
// call, upstream_unavailable.
func stdioReachesCarrier(facts *demoFacts, served []byte, key string) error {
	config, err := filepath.Abs(filepath.Join(demoStateDir, "demo-config.yaml"))
	if err != nil {
		return err
	}
	keyFile, err := filepath.Abs(filepath.Join(demoStateDir, demoUpstream+".key"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(demoStateDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(config, served, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		return err
	}
	i := slices.Index(facts.StdioCommand, "--config")
	if i < 0 || i+1 >= len(facts.StdioCommand) {
		return errors.New("the demo's stdio command names no --config")
	}
	facts.StdioCommand[i+1] = config
	facts.StdioEnv = map[string]string{demoCarrierEnv + "_FILE": keyFile}
	return nil
}

// demoDeskClient is the desk's client id at the development issuer.
const demoDeskClient = "orangerail-desk"

// addDemoApprovers gives each demo tenant one approver account at the
// development issuer, a person holding the approver role, with a password
// made for this run: {"approver": {tenant: login}}.
func addDemoApprovers(iss *devissuer.Issuer) (map[string]map[string]demoLogin, error) {
	logins := map[string]map[string]demoLogin{"approver": {}}
	for _, tenant := range []string{"acme", "globex"} {
		secret := make([]byte, 8)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		login := demoLogin{Username: "approver@" + tenant, Password: hex.EncodeToString(secret)}
		err := iss.AddAccount(devissuer.Account{Username: login.Username, Password: login.Password, Subject: "demo-approver@" + tenant,
			Claims: map[string]any{"org_id": tenant, "roles": []string{"approver"}, "kind": "human"}})
		if err != nil {
			return nil, err
		}
		logins["approver"][tenant] = login
	}
	return logins, nil
}

// mintDemoTokens mints an agent, an approver and an auditor token for
// each demo tenant, by role then tenant.
func mintDemoTokens(iss *devissuer.Issuer, issuer string) (map[string]map[string]string, error) {
	tokens := map[string]map[string]string{"agent": {}, "approver": {}, "auditor": {}}
	var err error
	for _, tenant := range []string{"acme", "globex"} {
		mint := func(subject string, extra map[string]any) (string, error) {
			extra["org_id"] = tenant
			return iss.Token(devissuer.Claims{Issuer: issuer, Subject: subject, Audience: "orangerail",
				Expiry: time.Now().Add(demoTokenLifetime), Extra: extra})
		}
		if tokens["agent"][tenant], err = mint("demo-agent@"+tenant, map[string]any{"roles": []string{"support"}, "scope": "orders:write"}); err != nil {
			return nil, err
		}
		if tokens["approver"][tenant], err = mint("demo-approver@"+tenant, map[string]any{"roles": []string{"approver"}, "kind": "human"}); err != nil {
			return nil, err
		}
		if tokens["auditor"][tenant], err = mint("demo-auditor@"+tenant, map[string]any{"roles": []string{"auditor"}}); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// needsQuoting reports whether r is anything but a character a shell word
// may hold bare.
func needsQuoting(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./:=,@", r)
}

// shellJoin quotes arguments for a POSIX shell.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsFunc(a, needsQuoting) {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// demoTokenLifetime is how long the demo's development tokens last.
const demoTokenLifetime = 12 * time.Hour

// serveDemo starts the development issuer, serves the example over HTTP
// with tokens from it, prints and records how to connect, and runs until
// ctx ends.
func serveDemo(ctx context.Context, out io.Writer, found *devdb.Database, facts *demoFacts, factsPath, listenAddr, publicURL string) error {
	// Bound first, so that a port 0 has its number before the URL naming
	// it is made.
	ln, err := app.Listen(ctx, listenAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if publicURL == "" {
		var ok bool
		if publicURL, ok = ontology.LoopbackURL(ln.Addr().String()); !ok {
			return errcode.New(errcode.Usage, fmt.Sprintf("--listen %s is not a loopback address: pass --public-url, the URL clients reach the demo at (make run PUBLIC_URL=URL)", listenAddr), nil)
		}
	}
	if err := ontology.CheckPublicURL(publicURL); err != nil {
		return errcode.New(errcode.Usage, "--public-url: "+err.Error(), nil)
	}
	iss, err := devissuer.New()
	if err != nil {
		return err
	}
	issuerLn, err := app.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	issuerSrv := &http.Server{Handler: iss.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = issuerSrv.Serve(issuerLn) }()
	defer issuerSrv.Close()
	issuer := "http://" + issuerLn.Addr().String()

	carrierURL, carrierKey, stopCarrier, err := startCarrier(ctx)
	if err != nil {
		return err
	}
	defer stopCarrier()
	served, err := demoConfigFor(carrierURL)
	if err != nil {
		return err
	}
	cfg, err := ontology.Parse(served)
	if err != nil {
		return err
	}
	if err := stdioReachesCarrier(facts, served, carrierKey); err != nil {
		return err
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuer, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: "kind", Values: []string{"human"}}}
	cfg.HTTP.Listen, cfg.HTTP.PublicURL = ln.Addr().String(), publicURL
	cfg.SQLQuery = ontology.SQLQuery{Enabled: true, Roles: []string{"auditor"}}
	// The desk signs people in at the development issuer, as a public
	// client (PKCE alone) whose one redirect is the desk's callback. Not
	// over plain http off loopback, where a config with a desk does not
	// load: its session cookie must travel over https.
	var deskURL string
	if public, _ := url.Parse(publicURL); !ontology.PlainOffLoopback(public) {
		deskURL = strings.TrimSuffix(publicURL, "/") + web.Path
		cfg.Desk = &ontology.Desk{ClientID: demoDeskClient}
		if err := iss.AddClient(devissuer.Client{ID: demoDeskClient, RedirectURIs: []string{deskURL + "/callback"}}); err != nil {
			return err
		}
	}
	// `orangerail login` signs in with the device grant, as the command
	// line's public client.
	if err := iss.AddClient(devissuer.Client{ID: login.ClientIDDefault}); err != nil {
		return err
	}
	ring, err := app.DevSecretKey(filepath.Join(demoStateDir, "secret.key"))
	if err != nil {
		return err
	}
	// The demo signs audit checkpoints with a development key kept beside
	// the secret key, often, so proofs can be asked for at once.
	checkpointKey := filepath.Join(demoStateDir, "checkpoint.key")
	checkpointPub, err := app.DevCheckpointKey(checkpointKey, "orangerail.demo")
	if err != nil {
		return err
	}
	cfg.Audit.Checkpoint = &ontology.AuditCheckpoint{KeyFile: checkpointKey, Interval: ontology.Duration(demoCheckpointInterval), Origin: "orangerail.demo/" + cfg.Service}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: found.URL, Ring: ring,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)), Version: readBuildFacts().Version, Serve: true})
	if err != nil {
		return err
	}
	defer rt.Close()

	facts.Issuer = issuer
	if facts.Tokens, err = mintDemoTokens(iss, issuer); err != nil {
		return err
	}
	if facts.Logins, err = addDemoApprovers(iss); err != nil {
		return err
	}

	facts.DeskURL, facts.ServerURL, facts.CarrierURL = deskURL, strings.TrimSuffix(publicURL, "/"), carrierURL
	url := strings.TrimSuffix(publicURL, "/") + app.MCPPath
	facts.MCPURL = &url
	// The address is bound: clients that read these facts before Serve
	// starts wait in its backlog.
	if err := writeFacts(factsPath, facts); err != nil {
		return err
	}
	printDemo(out, found, facts, factsPath)
	self := shellJoin([]string{facts.Self})
	fmt.Fprintf(out, "Audit checkpoints are signed every %s with a development key (%s); once acme has a record and a checkpoint,\n"+
		"prove its first record is in the latest one, and check the proof offline:\n"+
		"  %s audit prove --tenant acme --seq 1 --out proof.json --database-url %s\n  %s audit check-proof --key %s proof.json\n\n",
		demoCheckpointInterval, checkpointKey, self, demoURLArg(facts.DatabaseURL), self, checkpointPub)
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	err = rt.ServeHTTP(ctx, ln)
	fmt.Fprintln(out, "stopped")
	return err
}
