package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/sqlquery"
)

// The surface budget check (orangerail surface measure): what each
// audience's tools/list costs an agent's context, flat and meta.
//
// Tokens are estimated, not counted: ceil(bytes / 4) of the tools/list
// result's JSON as the SDK sends it. A real tokenizer is model-specific,
// and the Go ones (tiktoken ports) fetch their vocabularies at run time;
// four bytes a token is the usual rule of thumb for English and JSON
// with OpenAI's and Anthropic's tokenizers, deterministic, and enough to
// compare surfaces and hold a budget. Put the derivation beside the
// number: the report says it.

// BytesPerToken is the estimate's divisor.
const BytesPerToken = 4

// Tokens estimates the tokens of n bytes of JSON.
func Tokens(n int) int { return (n + BytesPerToken - 1) / BytesPerToken }

// AudienceMeasure is one audience's measure.
type AudienceMeasure struct {
	// Audience names the callers measured: anonymous, authenticated (no
	// role), or roles [a, b] (a caller holding exactly those roles).
	Audience string
	mcp.Measure
}

// SurfaceReport is the measure of every audience.
type SurfaceReport struct {
	Audiences []AudienceMeasure
	// Catalog says where the read schemas' types came from.
	Catalog string
	// Budget is surface.budget.max_tokens; 0 when none is set.
	Budget int
	// Unmeasured names tools that are served but not measured.
	Unmeasured []string
}

// MeasureSurface measures cfg's surface for each audience it names. With
// a database URL (url; the datasource's url_env first, as config check
// reads it), read schemas are typed from the live catalog; without one
// they are measured untyped (every key and filter any scalar), which
// understates them a little. sql_query, when enabled, is measured when
// its login (sql_query.url_env's, or url's with the query role) can read
// what the role may query, which its description lists; otherwise it is
// reported not measured, and why.
func MeasureSurface(ctx context.Context, cfg *ontology.Config, url string) (*SurfaceReport, error) {
	report := &SurfaceReport{Catalog: "not read: no database URL, so read schemas are untyped"}
	if cfg.Surface.Budget != nil {
		report.Budget = cfg.Surface.Budget.MaxTokens
	}
	catalog := &ontology.Catalog{}
	if url != "" {
		connCfg, err := database.ParseURL(url)
		if err != nil {
			return nil, err
		}
		conn, err := pgx.ConnectConfig(ctx, connCfg.ConnConfig)
		if err != nil {
			return nil, database.ClassifyConnectError(connCfg.ConnConfig, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if catalog, err = cfg.ReadCatalog(ctx, conn); err != nil {
			return nil, err
		}
		report.Catalog = "read from " + database.RedactURL(url)
	}
	// The engine needs a store to be made; a measure runs no statement,
	// so this pool, which connects only when asked for a connection, is
	// never asked.
	poolCfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	e, err := engine.New(engine.Config{Ontology: cfg, Store: pool, Effects: effects.Factories(), TargetReaders: effects.TargetReader, Catalog: catalog,
		Key: make([]byte, engine.KeySize), Mode: engine.ModeOf(cfg.Preset)})
	if err != nil {
		return nil, err
	}
	opts := mcp.Options{Engine: e, Ontology: cfg}
	if cfg.SQLQuery.Enabled {
		why := "no database URL to read what its role may query from"
		if url != "" {
			if opts.Querier, err = measureQuerier(ctx, cfg.SQLQuery, url, pool); err != nil {
				why = err.Error()
			}
		}
		if opts.Querier == nil {
			report.Unmeasured = append(report.Unmeasured, fmt.Sprintf("%s (%s)", ontology.SQLQueryTool, why))
		}
	}
	s, err := mcp.New(opts)
	if err != nil {
		return nil, err
	}
	for _, a := range audiences(cfg) {
		report.Audiences = append(report.Audiences, AudienceMeasure{Audience: a.name, Measure: s.Measure(a.caller)})
	}
	return report, nil
}

// measureQuerier makes sql_query's querier as serve does, for its tool's
// description; it runs no query (store is never asked for a connection).
func measureQuerier(ctx context.Context, q ontology.SQLQuery, url string, store *pgxpool.Pool) (*sqlquery.Querier, error) {
	login, err := queryURL(q, url)
	if err != nil {
		return nil, err
	}
	querier, err := sqlquery.New(ctx, sqlquery.Config{URL: login, Store: store, Schemas: q.Schemas})
	if err != nil {
		return nil, fmt.Errorf("its login could not read what the query role may read: %w", err)
	}
	return querier, nil
}

type audience struct {
	name   string
	caller *engine.Caller
}

// audiences are the callers a config names: anonymous when an object is
// public, authenticated without a role, and each distinct role set a
// roles: list names (objects' read_access, actions' policy, sql_query,
// prompts, surface.audiences), sorted. Each caller holds every scope the
// config names (a scope never hides a tool) and is an agent of tenant
// "tenant" with subject "surface-measure", as an audience predicate sees
// it.
func audiences(cfg *ontology.Config) []audience {
	sets := map[string][]string{}
	note := func(roles []string) {
		if len(roles) > 0 {
			r := slices.Sorted(slices.Values(roles))
			sets[strings.Join(r, ", ")] = slices.Compact(r)
		}
	}
	public := false
	for _, o := range cfg.Objects {
		public = public || o.ReadAccess.Kind == ontology.ReadPublic
		note(o.ReadAccess.Roles)
	}
	for _, a := range cfg.Actions {
		note(a.Policy.Roles)
	}
	if cfg.SQLQuery.Enabled {
		note(cfg.SQLQuery.Roles)
	}
	for _, p := range cfg.Prompts {
		note(p.Roles)
	}
	for _, r := range cfg.Surface.Audiences {
		note(r.Roles)
	}
	caller := func(roles []string) *engine.Caller {
		return &engine.Caller{Subject: "surface-measure", Tenant: "tenant", Roles: roles, Scopes: cfg.ScopeNames(), Kind: engine.ActorAgent}
	}
	var out []audience
	if public {
		out = append(out, audience{"anonymous", &engine.Caller{Tenant: "tenant", Scopes: cfg.ScopeNames()}})
	}
	out = append(out, audience{"authenticated", caller(nil)})
	for _, key := range slices.Sorted(maps.Keys(sets)) {
		out = append(out, audience{"roles [" + key + "]", caller(sets[key])})
	}
	return out
}

// Write prints the report as a table, the derivation of its numbers
// first, and returns the audiences whose served surface is over the
// budget.
func (r *SurfaceReport) Write(w io.Writer) (over []AudienceMeasure, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "tokens estimated as ceil(bytes/%d) of each tools/list result's JSON; catalog %s\n", BytesPerToken, r.Catalog)
	if len(r.Unmeasured) > 0 {
		fmt.Fprintf(&b, "not measured: %s\n", strings.Join(r.Unmeasured, ", "))
	}
	width := len("audience")
	for _, a := range r.Audiences {
		width = max(width, len(a.Audience))
	}
	fmt.Fprintf(&b, "%-*s  %-6s  %6s  %6s  %14s\n", width, "audience", "served", "flat", "meta", "list_resources")
	for _, a := range r.Audiences {
		meta, list := "-", "-"
		if a.Meta > 0 {
			meta, list = fmt.Sprint(Tokens(a.Meta)), fmt.Sprint(Tokens(a.ListResources))
		}
		fmt.Fprintf(&b, "%-*s  %-6s  %6d  %6s  %14s\n", width, a.Audience, a.Served, Tokens(a.Flat), meta, list)
		if r.Budget > 0 && Tokens(a.served()) > r.Budget {
			over = append(over, a)
		}
	}
	if r.Budget > 0 {
		fmt.Fprintf(&b, "budget: %d tokens a tools/list (surface.budget.max_tokens), on the surface each audience is served\n", r.Budget)
	}
	for _, a := range over {
		fmt.Fprintf(&b, "%s: %s: its %s tools/list costs %d tokens, over the budget of %d\n",
			errcode.MCPSurfaceOverBudget, a.Audience, a.Served, Tokens(a.served()), r.Budget)
	}
	_, err = io.WriteString(w, b.String())
	return over, err
}

// served is the size of the tools/list of the surface the audience is
// served.
func (a AudienceMeasure) served() int {
	if a.Served == ontology.SurfaceMeta {
		return cmp.Or(a.Meta, a.Flat)
	}
	return a.Flat
}
