// Package scaffold drafts an ontology config from a datasource's live
// catalog: one object per table with a single-column primary key and a
// tenant column, links from foreign keys, and no actions. What it guesses
// is marked for review; the draft is a start a person finishes, never a
// config to serve unread.
package scaffold

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// Options say what to scaffold.
type Options struct {
	// Tables names the tables to scaffold, each as table (in public) or
	// schema.table, spelled as the catalog spells them. Empty: every
	// ordinary table outside the system schemas and orangerail's own.
	Tables []string
	// Service is the config's service name, made to fit the ontology's
	// pattern. Empty: the database's name.
	Service string
}

// TenantColumns are the column names taken for a table's tenant column,
// in the order they are tried.
func TenantColumns() []string {
	return []string{"tenant_id", "org_id", "organization_id", "organisation_id", "account_id", "workspace_id", "team_id", "company_id"}
}

// createdColumns are the names of a timestamp a list sorts by, besides
// the key: when a row was made.
var createdColumns = []string{"created_at", "created_on", "created", "inserted_at", "createdat"}

// identifier is what the ontology accepts as a table, schema or column
// name (config.schema.json's identifier).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// maxObjectName keeps an object's tool names (NAME_list, the longer)
// within MCP's 64 characters.
const maxObjectName = 64 - len("_list")

// table is one table the catalog lists, and what the scaffold made of it.
type table struct {
	ref store.CatalogTable
	// shared says a table in public shares its name with a relation of
	// another schema (a table, a view, a sequence...): its config names
	// it schema-qualified, since a bare name is resolved by the serving
	// login's search_path, which may put the other schema first (the
	// default is "$user", public; pg_catalog always stands first).
	shared bool
	// skip says why the table is no object; empty when it is one.
	skip    string
	object  string
	key     string
	keyNote string
	tenant  string
	fields  []string
	omitted []string // columns whose names the ontology cannot name
	denied  []string // columns the login may not read (SELECT)
	secrets []string // columns whose names say they hold secrets
	sort    []string
	filters []string // columns a list filters by eq
	fks     []*store.CatalogForeignKey
}

// qualified is the table's name as a config writes it: schema.table
// outside public.
func qualified(t store.CatalogTable) string {
	if t.Schema == "public" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// quoted is the table's quoted name, as the catalog queries take it.
func quoted(t store.CatalogTable) string {
	return pgx.Identifier{t.Schema, t.Name}.Sanitize()
}

// Draft is a scaffolded config, ready to print.
type Draft struct {
	service string
	tables  []*table
}

// Generate connects to the datasource at url, reads its catalog in one
// read-only transaction and returns the drafted config as YAML.
func Generate(ctx context.Context, url string, opts Options) ([]byte, error) {
	cfg, err := database.ParseURL(url)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, database.ClassifyConnectError(cfg.ConnConfig, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Read-only: the scaffold only reads the catalog, and a team's
	// database should be able to tell.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only: nothing to keep or lose
	d, err := Read(ctx, tx, opts)
	if err != nil {
		return nil, err
	}
	return d.YAML()
}

// Read drafts a config from the catalog conn reads.
func Read(ctx context.Context, conn store.DBTX, opts Options) (*Draft, error) {
	s := store.New(conn)
	all, err := s.CatalogScaffoldTables(ctx)
	if err != nil {
		return nil, err
	}
	chosen, err := choose(all, opts.Tables)
	if err != nil {
		return nil, err
	}
	service := opts.Service
	if service == "" {
		if service, err = s.CatalogDatabaseName(ctx); err != nil {
			return nil, err
		}
	}
	d := &Draft{service: ServiceName(service)}
	elsewhere, err := s.CatalogShadowingNames(ctx)
	if err != nil {
		return nil, err
	}
	for _, ref := range chosen {
		t, err := readTable(ctx, s, ref)
		if err != nil {
			return nil, err
		}
		t.shared = ref.Schema == "public" && slices.Contains(elsewhere, ref.Name)
		d.tables = append(d.tables, t)
	}
	d.nameObjects()
	return d, nil
}

// choose picks the named tables out of all; every name must be one of
// them. Its order is the catalog's, by schema and name in byte order.
func choose(all []*store.CatalogTable, names []string) ([]store.CatalogTable, error) {
	var out []store.CatalogTable
	for _, t := range all {
		// Migrations' bookkeeping, orangerail's own like its schema.
		if t.Name != database.VersionTable {
			out = append(out, *t)
		}
	}
	slices.SortFunc(out, func(a, b store.CatalogTable) int {
		return cmp.Or(strings.Compare(a.Schema, b.Schema), strings.Compare(a.Name, b.Name))
	})
	if len(names) == 0 {
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[strings.TrimSpace(n)] = true
	}
	var picked []store.CatalogTable
	for _, t := range out {
		// A table in public is named either way: orders, public.orders.
		for _, q := range []string{qualified(t), t.Schema + "." + t.Name} {
			if want[q] {
				if !slices.ContainsFunc(picked, func(p store.CatalogTable) bool { return p == t }) {
					picked = append(picked, t)
				}
				delete(want, q)
			}
		}
	}
	if len(want) > 0 {
		unknown := slices.Sorted(func(yield func(string) bool) {
			for n := range want {
				if !yield(n) {
					return
				}
			}
		})
		return nil, errcode.New(errcode.ScaffoldTableUnknown,
			fmt.Sprintf("no table %s in the datasource (name a table as table or public.table in public, else schema.table, spelled as the catalog spells it; a partition is read through its partitioned table: name that)", strings.Join(quoteAll(unknown), ", ")), nil)
	}
	return picked, nil
}

// shown is a catalog name as the draft's comments show it: as it is when
// every character of it prints, else quoted, so that no character of a
// name Postgres allows (a control character, a line break, a
// noncharacter) reaches the file as itself and makes it a file no YAML
// reader loads.
func shown(name string) string {
	if strings.IndexFunc(name, func(r rune) bool { return !strconv.IsPrint(r) }) < 0 {
		return name
	}
	return strconv.Quote(name)
}

// shownAll is names, each shown.
func shownAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = shown(n)
	}
	return out
}

// shownTable is t's qualified name (qualified) as the draft's comments
// show it (shown).
func shownTable(t store.CatalogTable) string { return shown(qualified(t)) }

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// readTable reads a table's columns and keys, and decides its object.
func readTable(ctx context.Context, s *store.Store, ref store.CatalogTable) (*table, error) {
	t := &table{ref: ref}
	if !identifier.MatchString(ref.Schema) || !identifier.MatchString(ref.Name) {
		t.skip = "its name is not an identifier the ontology accepts ([A-Za-z_][A-Za-z0-9_]*); rename it or serve it through a view"
		return t, nil
	}
	switch usable, err := s.CatalogSchemaUsable(ctx, ref.Schema); {
	case err != nil:
		return nil, err
	case !usable:
		// Another team's schema, say: its tables are listed by the
		// catalog, which everyone reads, and read by nobody without it.
		t.skip = fmt.Sprintf("this login may not use its schema (USAGE), so it reads none of it; scaffold as a login that may (GRANT USAGE ON SCHEMA %s TO …), or name only the tables it reads (--tables)",
			pgx.Identifier{ref.Schema}.Sanitize())
		return t, nil
	}
	name := quoted(ref)
	rows, err := s.CatalogTableColumns(ctx, name)
	if err != nil {
		return nil, err
	}
	pk, err := s.CatalogPrimaryKey(ctx, name)
	if err != nil {
		return nil, err
	}
	kinds, enums := map[string]ontology.ValueKind{}, map[string]bool{}
	readable := map[string]bool{}
	for _, r := range rows {
		if !identifier.MatchString(r.Name) {
			t.omitted = append(t.omitted, r.Name)
			continue
		}
		t.fields = append(t.fields, r.Name)
		readable[r.Name] = r.Readable
		kinds[r.Name], enums[r.Name] = ontology.ColumnOf(r).Kind, r.Enum
	}
	for _, want := range TenantColumns() {
		// A table whose key is the column names no tenant by it: it is
		// the tenants' own table, or its key is misnamed.
		if !slices.Equal(pk, []string{want}) && slices.Contains(t.fields, want) {
			t.tenant = want
			break
		}
	}
	switch {
	case len(pk) == 0:
		t.skip = "it has no primary key; an object reads one row by a single-column key"
		return t, nil
	case len(pk) == 1:
		t.key, t.keyNote = pk[0], "the primary key"
	case len(pk) == 2 && t.tenant != "" && slices.Contains(pk, t.tenant):
		// A key unique within a tenant, (tenant, id): the engine reads a
		// row by its key and the caller's tenant, so id is the key.
		t.key, t.keyNote = pk[0], "the primary key besides the tenant column"
		if t.key == t.tenant {
			t.key = pk[1]
		}
	default:
		t.skip = fmt.Sprintf("its primary key (%s) has %d columns; an object's key is one column, besides the tenant column", strings.Join(shownAll(pk), ", "), len(pk))
		return t, nil
	}
	if !slices.Contains(t.fields, t.key) {
		t.skip = fmt.Sprintf("its primary key column %q is not an identifier the ontology accepts", t.key)
		return t, nil
	}
	if t.tenant == "" && len(pk) == 1 && slices.Contains(TenantColumns(), pk[0]) {
		t.skip = fmt.Sprintf("its only key is its tenant column %q: one row a tenant (the tenants' own table, perhaps), which no object reads by a key of its own", pk[0])
		return t, nil
	}
	if secretLike(t.key) {
		// Its every row's key is a secret (a session's token, an API
		// key): a list would hand agents each one of the tenant's.
		t.skip = fmt.Sprintf("its key %q is named as a secret is, and an object serves its key to every caller who lists it; serve it through a view keyed otherwise", t.key)
		return t, nil
	}
	if t.tenant == "" {
		t.skip = fmt.Sprintf("no tenant column found (tried %s); every object needs tenant_column, so add it by hand if the table has one",
			strings.Join(TenantColumns(), ", "))
		return t, nil
	}
	// What the login may not read (no SELECT on the table, a column grant
	// that withholds some) no read of it could return: every read of the
	// object would fail, or, served as a login that may, hand agents what
	// the grant withheld.
	switch {
	case !slices.ContainsFunc(rows, func(r *store.CatalogColumn) bool { return r.Readable }):
		t.skip = fmt.Sprintf("this login may not read it (SELECT); scaffold as a login that may (GRANT SELECT ON %s TO …), or name only the tables it reads (--tables)", name)
		return t, nil
	case !readable[t.key]:
		t.skip = fmt.Sprintf("this login may not read its key column %q (SELECT)", t.key)
		return t, nil
	case !readable[t.tenant]:
		t.skip = fmt.Sprintf("this login may not read its tenant column %q (SELECT)", t.tenant)
		return t, nil
	}
	t.fields = slices.DeleteFunc(t.fields, func(f string) bool {
		if !readable[f] {
			t.denied = append(t.denied, f)
		}
		return !readable[f]
	})
	// A column whose name says it holds a secret is no field until a
	// person adds it back: a draft served as it is must not hand agents
	// password hashes and tokens. The key (not one, as above) and the
	// tenant column stay.
	fields := t.fields[:0:0]
	for _, f := range t.fields {
		if f != t.key && f != t.tenant && secretLike(f) {
			t.secrets = append(t.secrets, f)
			continue
		}
		fields = append(fields, f)
	}
	t.fields = fields
	if t.fks, err = s.CatalogForeignKeys(ctx, name); err != nil {
		return nil, err
	}
	t.sort = []string{t.key}
	for _, f := range t.fields {
		switch kinds[f] {
		case ontology.ValueTimestamptz, ontology.ValueTimestamp, ontology.ValueDate:
			if slices.Contains(createdColumns, strings.ToLower(f)) && f != t.key {
				t.sort = append(t.sort, f)
			}
		}
	}
	filtered := map[string]bool{}
	for _, fk := range t.fks {
		if col, _, ok := linkPair(fk, t.tenant, ""); ok {
			filtered[col] = true
		}
	}
	for _, f := range t.fields {
		if (kinds[f] == ontology.ValueText || enums[f]) && statusLike(f) {
			filtered[f] = true
		}
	}
	for _, f := range t.fields {
		// The key is read with get, and the tenant is the caller's.
		if filtered[f] && f != t.key && f != t.tenant {
			t.filters = append(t.filters, f)
		}
	}
	return t, nil
}

// linkPair is the column pair a foreign key joins on besides the tenant:
// a single-column key's, or, of a two-column key that pairs the tenant
// columns (tenant with refTenant; "" takes any), the other pair.
func linkPair(fk *store.CatalogForeignKey, tenant, refTenant string) (col, refCol string, ok bool) {
	switch len(fk.Columns) {
	case 1:
		return fk.Columns[0], fk.RefColumns[0], true
	case 2:
		for i := range 2 {
			if fk.Columns[i] == tenant && (refTenant == "" || fk.RefColumns[i] == refTenant) {
				return fk.Columns[1-i], fk.RefColumns[1-i], true
			}
		}
	}
	return "", "", false
}

// statusLike reports whether a text column's name says it holds one of a
// few states, which a list is usually filtered by.
func statusLike(name string) bool {
	n := strings.ToLower(name)
	return n == "status" || n == "state" || strings.HasSuffix(n, "_status") || strings.HasSuffix(n, "_state")
}

// secretLike reports whether a column's name says it holds a secret: a
// password or passphrase, a secret, an API, private, access, signing,
// HMAC or encryption key, a one-time-password seed, a credential, a token
// or a salt — unless its last word says it is about one (token_id,
// token_expires_at, secret_count) rather than one.
func secretLike(name string) bool {
	n := strings.ToLower(name)
	words := nameWords(name)
	switch words[len(words)-1] {
	case "id", "ids", "count", "type", "kind", "at", "expires", "expiry", "version":
		return false
	}
	// Spelled with underscores, run together or in camel case (privateKey
	// is private_key once its words are joined).
	joined := strings.Join(words, "_")
	for _, s := range []string{"apikey", "api_key", "privatekey", "private_key", "accesskey", "access_key",
		"signingkey", "signing_key", "hmackey", "hmac_key", "encryptionkey", "encryption_key", "totp_seed", "otp_seed"} {
		if strings.Contains(n, s) || strings.Contains(joined, s) {
			return true
		}
	}
	// A word that is one of these nouns or ends on one (clientsecret,
	// userpassword), not one that merely begins with it (secretary).
	return slices.ContainsFunc(words, func(w string) bool {
		for _, noun := range []string{"password", "passwd", "passphrase", "secret", "credential"} {
			if strings.HasSuffix(strings.TrimSuffix(w, "s"), noun) {
				return true
			}
		}
		return w == "token" || w == "tokens" || w == "salt" || w == "pwd"
	})
}

// nameWords splits a column's name into its words, lower-cased: at
// underscores, spaces and where a lower-case letter meets an upper-case
// one (apiToken is api, token).
func nameWords(name string) []string {
	var words []string
	start := 0
	for i, r := range name {
		switch {
		case r == '_' || r == ' ':
			words, start = append(words, name[start:i]), i+1
		case unicode.IsUpper(r) && i > start && unicode.IsLower(rune(name[i-1])):
			words, start = append(words, name[start:i]), i
		}
	}
	words = append(words, name[start:])
	for i := range words {
		words[i] = strings.ToLower(words[i])
	}
	return words
}

// nameObjects names each scaffolded table's object: its table's name, in
// public, else schema_table; a name taken by an earlier table gets a
// number. Public's tables are named first, so a bare name is always its
// public table's, then the others in the catalog's order (by schema and
// table).
func (d *Draft) nameObjects() {
	taken := map[string]bool{}
	outside := func(t *table) int {
		if t.ref.Schema == "public" {
			return 0
		}
		return 1
	}
	order := slices.Clone(d.tables)
	slices.SortStableFunc(order, func(a, b *table) int { return cmp.Compare(outside(a), outside(b)) })
	for _, t := range order {
		if t.skip != "" {
			continue
		}
		base := t.ref.Name
		if t.ref.Schema != "public" {
			base = t.ref.Schema + "_" + t.ref.Name
		}
		name := base
		for i := 2; taken[name]; i++ {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		if len(name) > maxObjectName {
			t.skip = fmt.Sprintf("its object's name %q would make tool names over MCP's 64 characters; write the object by hand under a shorter name", name)
			continue
		}
		taken[name] = true
		t.object = name
	}
}

// ServiceName makes name fit the ontology's service pattern: lower case,
// digits and '-', starting with a letter or digit, at most 63 characters;
// "orangerail" when nothing of it is left.
func ServiceName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	s := b.String()
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	if s == "" {
		return "orangerail"
	}
	return s
}
