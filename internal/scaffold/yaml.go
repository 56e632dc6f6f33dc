package scaffold

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
)

// review marks a guessed value.
const review = "REVIEW: "

// header opens every draft: what it is, and why it has no actions.
const header = `A draft ontology config, scaffolded by orangerail init from the live catalog.
Review every line marked REVIEW before serving it: tenant columns, sorts
and filters are guessed from column names and foreign keys, and every
column is a field until you drop the ones agents should not read (but those
whose names say they hold secrets, left out and named).

No actions: an action changes data, and a person must write its policy
(who may call it, and whether a person approves each call). See the
README's "The ontology config"; for an upstream API, orangerail policy
compile drafts actions from its OpenAPI document.

No datasource: orangerail reads these tables in its own database. When
they live in another, add datasource: {url_env: DATASOURCE_URL}.`

// YAML returns the draft as a config file. The same catalog gives the same
// bytes: tables, fields and links come in a fixed order.
func (d *Draft) YAML() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	service := scalar("service")
	service.HeadComment = header
	root.Content = append(root.Content, service, scalar(d.service))

	objects := &yaml.Node{Kind: yaml.MappingNode}
	var skipped []string
	for _, t := range d.tables {
		if t.skip != "" {
			skipped = append(skipped, fmt.Sprintf("  %s: %s.", shownTable(t.ref), t.skip))
			continue
		}
		objects.Content = append(objects.Content, scalar(t.object), t.node())
	}
	if len(objects.Content) == 0 {
		objects.Style = yaml.FlowStyle
	}
	key := scalar("objects")
	if len(skipped) > 0 {
		key.HeadComment = "Tables left out:\n" + strings.Join(skipped, "\n")
	}
	root.Content = append(root.Content, key, objects)

	if links := d.links(); len(links.Content) > 0 {
		k := scalar("links")
		k.HeadComment = "From foreign keys between the tables above (on one column, or on the tenant column and one other)."
		root.Content = append(root.Content, k, links)
	}

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// node is a scaffolded table's object.
func (t *table) node() *yaml.Node {
	o := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node, comment string) {
		kn := scalar(k)
		if comment != "" {
			v.LineComment = comment
		}
		o.Content = append(o.Content, kn, v)
	}
	table := qualified(t.ref)
	if t.shared {
		table = t.ref.Schema + "." + t.ref.Name
	}
	add("table", scalar(table), "")
	add("key", scalar(t.key), t.keyNote)
	add("tenant_column", scalar(t.tenant), review+"guessed from the column name")
	fieldsNote := review + "every column; drop what agents should not read"
	if len(t.omitted) > 0 {
		// The ontology names a column by an identifier; these have no
		// name it can take.
		fieldsNote += fmt.Sprintf("; left out %s: not identifiers the ontology accepts", strings.Join(quoteAll(t.omitted), ", "))
	}
	if len(t.denied) > 0 {
		fieldsNote += fmt.Sprintf("; left out %s: this login may not read them (SELECT)", strings.Join(quoteAll(t.denied), ", "))
	}
	if len(t.secrets) > 0 {
		fieldsNote += fmt.Sprintf("; left out %s: their names say they hold secrets, add one only if agents must read it", strings.Join(quoteAll(t.secrets), ", "))
	}
	add("fields", flowSeq(t.fields), fieldsNote)
	add("read_access", scalar(string(ontology.ReadAuthenticated)), review+"the conservative default")

	list := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	if len(t.filters) > 0 {
		filters := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, f := range t.filters {
			filters.Content = append(filters.Content, scalar(f), flowSeq([]string{string(ontology.FilterEq)}))
		}
		list.Content = append(list.Content, scalar("filters"), filters)
	}
	list.Content = append(list.Content, scalar("sort"), flowSeq(t.sort),
		scalar("max_limit"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(ontology.ListMaxLimitDefault)})
	add("list", list, review+"guessed from foreign keys and column names")
	return o
}

// links makes a link of every foreign key between two scaffolded objects
// that joins one column pair besides the tenant (see linkPair) whose
// columns are both fields, named from_to (then from_to_column, then
// numbered, when a name is taken).
func (d *Draft) links() *yaml.Node {
	byRef := map[string]*table{}
	for _, t := range d.tables {
		if t.skip == "" {
			byRef[quoted(t.ref)] = t
		}
	}
	links := &yaml.Node{Kind: yaml.MappingNode}
	taken := map[string]bool{}
	for _, t := range d.tables {
		if t.skip != "" {
			continue
		}
		for _, fk := range t.fks {
			to, ok := byRef[quoted(fk.Ref)]
			if !ok {
				continue
			}
			col, refCol, ok := linkPair(fk, t.tenant, to.tenant)
			if !ok || !slices.Contains(t.fields, col) || !slices.Contains(to.fields, refCol) {
				continue
			}
			name := t.object + "_" + to.object
			if taken[name] {
				name += "_" + col
			}
			base := name
			for i := 2; taken[name]; i++ {
				name = fmt.Sprintf("%s_%d", base, i)
			}
			taken[name] = true
			link := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
				scalar("from"), scalar(t.object + "." + col),
				scalar("to"), scalar(to.object + "." + refCol),
			}}
			links.Content = append(links.Content, scalar(name), link)
		}
	}
	return links
}

// scalar is a string; the encoder quotes one that would read as another
// type (null, true, a number).
func scalar(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func flowSeq(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range items {
		n.Content = append(n.Content, scalar(s))
	}
	return n
}
