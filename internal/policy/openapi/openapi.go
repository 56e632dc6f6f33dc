// Package openapi reads an OpenAPI 2.0 (Swagger), 3.0 or 3.1 document,
// JSON or YAML, into an apidoc.Document: every $ref resolved, including
// $refs into files beside the document, and every part carrying its JSON
// pointer ("/paths/~1pets/get"; "common.yaml#/components/schemas/Pet" in
// another file) so that the policy compiler can say where each value came
// from.
//
// It reads the decoded document itself rather than through an OpenAPI
// object model: provenance needs the pointer of every value, which the
// libraries measured (kin-openapi, libopenapi) do not give, and they cost
// more than the compiler's whole budget (see the README, "The policy
// compiler").
package openapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// Errors a caller classifies.
var (
	// ErrUnreadable is a file that is not JSON or YAML.
	ErrUnreadable = errors.New("the document cannot be read")
	// ErrNotOpenAPI is JSON or YAML that is not an OpenAPI 2.0, 3.0 or
	// 3.1 document.
	ErrNotOpenAPI = errors.New("not an OpenAPI 2.0, 3.0 or 3.1 document")
	// ErrTooLarge is a document that expands past what the reader reads:
	// YAML aliases that multiply it, or $refs that make more operation
	// parts than a description of any real API has. It comes with
	// ErrUnreadable when the file itself cannot be expanded.
	ErrTooLarge = errors.New("the document is too large to read")
)

// Parse reads the document data, named name inside fsys, which serves the
// files its $refs name (nil: a $ref to another file is a problem).
func Parse(data []byte, name string, fsys fs.FS) (*apidoc.Document, error) {
	root, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: its top level is not an object", ErrNotOpenAPI)
	}
	l := &loader{fsys: fsys, main: path.Clean(name), files: map[string]any{path.Clean(name): root},
		schemas: map[string]*apidoc.Schema{}, reading: map[*apidoc.Schema]bool{}, read: map[string]*apidoc.Schema{}, seen: map[apidoc.Problem]bool{}}
	doc := &apidoc.Document{Schemes: map[string]*apidoc.Scheme{}}
	switch v := version(m["openapi"]); {
	case strings.HasPrefix(v, "3.0.") || strings.HasPrefix(v, "3.1.") || v == "3.0" || v == "3.1":
		doc.Format, doc.Version, l.v31 = apidoc.OpenAPI, v, strings.HasPrefix(v, "3.1")
	case m["openapi"] != nil:
		return nil, fmt.Errorf("%w: it says openapi %q; this compiler reads 2.0, 3.0 and 3.1", ErrNotOpenAPI, v)
	case version(m["swagger"]) == "2.0":
		doc.Format, doc.Version, l.swagger = apidoc.Swagger, "2.0", true
	case m["swagger"] != nil:
		return nil, fmt.Errorf("%w: it says swagger %q; this compiler reads 2.0", ErrNotOpenAPI, version(m["swagger"]))
	default:
		return nil, fmt.Errorf("%w: it has no openapi or swagger member naming its version", ErrNotOpenAPI)
	}
	if info, ok := m["info"].(map[string]any); ok {
		doc.Title, doc.APIVersion = str(info["title"]), version(info["version"])
	}
	top := l.at(l.main, "")
	doc.Servers = l.servers(top, m)
	l.securitySchemes(doc, top, m)
	l.operations(doc, top, m)
	if l.work > maxWork {
		return nil, fmt.Errorf("%w: its $refs make more than %d operations, parameters, responses and security requirements", ErrTooLarge, maxWork)
	}
	doc.Problems = l.problems
	return doc, nil
}

// version reads a version member. The specifications make it a string
// ("2.0", "3.0.3"), but YAML reads an unquoted 2.0 as a number, which
// decodes as the whole number 2: it is spelled back with its ".0".
func version(v any) string {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1e6 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return str(v)
}

// loc is a place in one of the document's files.
type loc struct{ file, ptr string }

// source spells a place: its pointer in the main file, file#pointer in
// another.
func (l *loader) source(at loc) string {
	if at.file == l.main {
		return at.ptr
	}
	return at.file + "#" + at.ptr
}

func (l *loader) at(file, ptr string) loc { return loc{file, ptr} }

func (at loc) child(tokens ...string) loc { return loc{at.file, apidoc.Pointer(at.ptr, tokens...)} }

// loader reads one document and the files it refers to.
type loader struct {
	fsys    fs.FS
	main    string
	swagger bool
	// v31 is OpenAPI 3.1, whose schemas are JSON Schema 2020-12.
	v31   bool
	files map[string]any
	// failed holds why a file could not be read, so that it is tried once.
	failed map[string]error
	// schemas holds each definition a $ref names, so that a definition
	// $ref'd twice is one *Schema and a recursive one a cycle.
	schemas map[string]*apidoc.Schema
	// reading holds the definitions being read: one a $ref reaches again
	// through $refs alone, before any schema of its own, names nothing.
	reading map[*apidoc.Schema]bool
	// read holds the schema read at each place, so that a place reached
	// again (a shared parameter, response or path item) is not read
	// again: the reader's work is the document's size, not the number of
	// ways to reach its parts.
	read  map[string]*apidoc.Schema
	nodes int
	// depth is how deep the schema being read is nested.
	depth int
	// work counts the operations, parameters, responses and security
	// requirements made, which $refs can multiply.
	work     int
	problems []apidoc.Problem
	seen     map[apidoc.Problem]bool
}

// Bounds on what one document may make: schemas (each place read once),
// and the other parts of its operations, which $refs can multiply
// (maxWork is 50 times what the largest description in the corpus,
// discord's, makes).
const (
	maxSchemas = 500_000
	maxWork    = 300_000
)

// maxFileBytes bounds a file a $ref reads: a description is megabytes,
// and a special file (a FIFO, /dev/zero behind a link) never ends.
const maxFileBytes = 64 << 20

// problem records a problem once: a place read through several routes
// says so once.
func (l *loader) problem(at loc, format string, args ...any) {
	p := apidoc.Problem{Source: l.source(at), Message: fmt.Sprintf(format, args...)}
	if !l.seen[p] {
		l.seen[p] = true
		l.problems = append(l.problems, p)
	}
}

// spend counts n parts made, and says whether the budget still holds.
func (l *loader) spend(n int) bool {
	l.work += n
	return l.work <= maxWork
}

// file returns a file's decoded root, reading it once.
func (l *loader) file(name string) (any, error) {
	if v, ok := l.files[name]; ok {
		return v, nil
	}
	if err, ok := l.failed[name]; ok {
		return nil, err
	}
	v, err := l.readFile(name)
	if err != nil {
		if l.failed == nil {
			l.failed = map[string]error{}
		}
		l.failed[name] = err
		return nil, err
	}
	l.files[name] = v
	return v, nil
}

func (l *loader) readFile(name string) (any, error) {
	if l.fsys == nil {
		return nil, errors.New("no directory to read it from")
	}
	// Judged before it is opened: opening a FIFO waits for a writer,
	// which never comes.
	if info, err := fs.Stat(l.fsys, name); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := l.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, maxFileBytes>>20)
	}
	v, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// get returns the value at a place, or why there is none.
func (l *loader) get(at loc) (any, error) {
	v, err := l.file(at.file)
	if err != nil {
		return nil, err
	}
	if at.ptr == "" {
		return v, nil
	}
	for _, token := range strings.Split(at.ptr[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[token]
			if !ok {
				return nil, errNothing
			}
			v = next
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(node) || strconv.Itoa(i) != token {
				return nil, errNothing
			}
			v = node[i]
		default:
			return nil, errNothing
		}
	}
	return v, nil
}

// errNothing is a pointer that leads nowhere in a file that was read.
var errNothing = errors.New("nothing is there")

// nothing says why a $ref led nowhere.
func nothing(ref string, err error) string {
	if errors.Is(err, errNothing) {
		return fmt.Sprintf("the $ref %q names nothing", ref)
	}
	return fmt.Sprintf("the $ref %q names nothing that can be read: %v", ref, err)
}

// target reads a $ref: the place it names, relative to from's file. A
// $ref is a URI reference (RFC 3986 §4.1): only a relative-path one is
// read, against from's file (§5.2); one with a scheme (https:, file:) or
// an authority (//host) would be the network or the whole file system,
// and an absolute path (/etc/x) leaves the directory.
func (l *loader) target(from loc, ref string) (loc, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return loc{}, fmt.Errorf("the $ref %q is not a URI reference: %w", ref, err)
	}
	if u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(ref, "//") {
		return loc{}, fmt.Errorf("the $ref %q names a URL: the compiler reads no network", ref)
	}
	name := from.file
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return loc{}, fmt.Errorf("the $ref %q names a file outside the document's directory", ref)
		}
		name = path.Join(path.Dir(from.file), u.Path)
		if !fs.ValidPath(name) {
			return loc{}, fmt.Errorf("the $ref %q names a file outside the document's directory", ref)
		}
	}
	// The fragment is a JSON pointer written in a URI, percent-encoded
	// (RFC 6901 §6): "{" as %7B, a space as %20.
	frag := u.Fragment
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return loc{}, fmt.Errorf("the $ref %q does not end in a JSON pointer", ref)
	}
	return loc{name, frag}, nil
}

// follow resolves an object that may be a $ref (a parameter, a response,
// a request body, a path item, a scheme), through a chain of them, to the
// object itself and its place.
func (l *loader) follow(at loc, v any) (loc, map[string]any, bool) {
	// A failure is the place's where the chain began, whatever hop it
	// failed at: that place is the operation's (or a part it uses), so the
	// operation that drops the part fails closed; the hop is named.
	start := at
	failed := func(format string, args ...any) (loc, map[string]any, bool) {
		msg := fmt.Sprintf(format, args...)
		if at != start {
			msg += " (at " + l.source(at) + ", reached through $ref)"
		}
		l.problem(start, "%s", msg)
		return start, nil, false
	}
	for hops := 0; ; hops++ {
		m, ok := v.(map[string]any)
		if !ok {
			return failed("expected an object")
		}
		ref, isRef := m["$ref"].(string)
		if !isRef {
			return at, m, true
		}
		if hops == 32 {
			return failed("$ref chains more than 32 times (a cycle?)")
		}
		next, err := l.target(at, ref)
		if err != nil {
			return failed("%v", err)
		}
		if v, err = l.get(next); err != nil {
			return failed("%s", nothing(ref, err))
		}
		at = next
	}
}

// servers lists where the API is served: 3.x servers, or 2.0's schemes,
// host and basePath.
func (l *loader) servers(top loc, m map[string]any) []apidoc.Server {
	var out []apidoc.Server
	if !l.swagger {
		for i, s := range list(m["servers"]) {
			if sm, ok := s.(map[string]any); ok && str(sm["url"]) != "" {
				out = append(out, apidoc.Server{URL: str(sm["url"]), Description: str(sm["description"]), Source: l.source(top.child("servers", fmt.Sprint(i)))})
			}
		}
		return out
	}
	host := str(m["host"])
	if host == "" {
		return nil
	}
	schemes := strs(m["schemes"])
	if len(schemes) == 0 {
		schemes = []string{"https"}
	}
	for _, s := range schemes {
		out = append(out, apidoc.Server{URL: s + "://" + host + str(m["basePath"]), Source: l.source(top.child("host"))})
	}
	return out
}

// securitySchemes reads 3.x components.securitySchemes or 2.0
// securityDefinitions.
func (l *loader) securitySchemes(doc *apidoc.Document, top loc, m map[string]any) {
	at := top.child("components", "securitySchemes")
	defs, _ := l.get(at)
	if l.swagger {
		at = top.child("securityDefinitions")
		defs, _ = l.get(at)
	}
	dm, _ := defs.(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(dm)) {
		sat, sm, ok := l.follow(at.child(name), dm[name])
		if !ok {
			continue
		}
		s := &apidoc.Scheme{Name: name, Type: apidoc.SchemeType(str(sm["type"])), In: str(sm["in"]), ParamName: str(sm["name"]),
			HTTPScheme: strings.ToLower(str(sm["scheme"])), OpenIDConnectURL: str(sm["openIdConnectUrl"]), Description: str(sm["description"]), Source: l.source(sat)}
		if l.swagger && s.Type == "basic" {
			s.Type, s.HTTPScheme = apidoc.SchemeHTTP, "basic"
		}
		if s.Type == apidoc.SchemeOAuth2 {
			if l.swagger {
				// 2.0's application and accessCode are 3.x's
				// clientCredentials and authorizationCode.
				flow := map[string]string{"application": "clientCredentials", "accessCode": "authorizationCode"}[str(sm["flow"])]
				if flow == "" {
					flow = str(sm["flow"])
				}
				s.Flows = append(s.Flows, readFlow(flow, sm))
			} else if flows, ok := sm["flows"].(map[string]any); ok {
				for _, f := range []string{"implicit", "password", "clientCredentials", "authorizationCode"} {
					if fm, ok := flows[f].(map[string]any); ok {
						s.Flows = append(s.Flows, readFlow(f, fm))
					}
				}
			}
		}
		doc.Schemes[name] = s
	}
}

func readFlow(name string, m map[string]any) apidoc.Flow {
	f := apidoc.Flow{Name: name, AuthorizationURL: str(m["authorizationUrl"]), TokenURL: str(m["tokenUrl"]), RefreshURL: str(m["refreshUrl"])}
	if scopes, ok := m["scopes"].(map[string]any); ok {
		f.Scopes = slices.Sorted(maps.Keys(scopes))
	}
	return f
}

// methods are the path item members that are operations, in the order
// operations are listed.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// pathItemFields are a Path Item Object's members that are not operations
// (OAS 2.0, 3.0, 3.1).
var pathItemFields = []string{"$ref", "summary", "description", "servers", "parameters"}

// operations reads every path's operations, paths sorted. A member of
// paths or of a path item that is neither what OAS names there nor an
// extension (x-) is a problem, not skipped without a word: a path written
// without its leading /, a method in capitals.
func (l *loader) operations(doc *apidoc.Document, top loc, m map[string]any) {
	paths, _ := m["paths"].(map[string]any)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		pathAt := top.child("paths", p)
		if strings.HasPrefix(p, "x-") {
			continue
		}
		if !strings.HasPrefix(p, "/") {
			l.problem(pathAt, "a path begins with / (OAS \"Paths Object\"): %q is not read, nor its operations", p)
			continue
		}
		itemAt, item, ok := l.follow(pathAt, paths[p])
		if !ok {
			continue
		}
		// A path item's $ref and the members written beside it are one
		// item (OAS "Path Item Object"); a member in both is undefined,
		// and the one beside the $ref is read, said as a problem.
		at := map[string]loc{}
		for key := range item {
			at[key] = itemAt.child(key)
		}
		if local, _ := paths[p].(map[string]any); itemAt != pathAt {
			merged := maps.Clone(item)
			for key, v := range local {
				if key == "$ref" {
					continue
				}
				if _, both := item[key]; both && key != "summary" && key != "description" {
					l.problem(pathAt.child(key), "%s is written both beside the path item's $ref and in the item it names, which OAS leaves undefined: the one beside it is read", key)
				}
				merged[key], at[key] = v, pathAt.child(key)
			}
			item = merged
		}
		for _, key := range slices.Sorted(maps.Keys(item)) {
			if !slices.Contains(methods, key) && !slices.Contains(pathItemFields, key) && !strings.HasPrefix(key, "x-") {
				what := "not a member of a path item"
				if slices.Contains(methods, strings.ToLower(key)) {
					what = "not an operation: methods are written in lower case"
				}
				l.problem(at[key], "%q is %s (OAS \"Path Item Object\"): it is not read", key, what)
			}
		}
		locOf := func(key string) loc {
			if a, ok := at[key]; ok {
				return a
			}
			return itemAt.child(key)
		}
		shared := l.parameters(locOf("parameters"), item["parameters"])
		// The path item's servers, where it names its own: locOf says
		// whether beside the item's $ref or in it.
		serversAt := itemAt
		if locOf("servers") == pathAt.child("servers") {
			serversAt = pathAt
		}
		pathServers := l.servers(serversAt, map[string]any{"servers": item["servers"]})
		for _, method := range methods {
			om, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			if !l.spend(1) {
				return
			}
			opAt := locOf(method)
			op := &apidoc.Operation{ID: str(om["operationId"]), Source: l.source(opAt), Method: strings.ToUpper(method), Path: p,
				Summary: str(om["summary"]), Description: str(om["description"]), Tags: strs(om["tags"])}
			op.Deprecated, _ = om["deprecated"].(bool)
			if op.Servers = l.servers(opAt, map[string]any{"servers": om["servers"]}); op.Servers == nil {
				op.Servers = pathServers
			}
			own := l.parameters(opAt.child("parameters"), om["parameters"])
			// An operation's parameter overrides the path item's of the
			// same name and location (OAS 3.1 §4.8.10.1, 2.0 "Operation
			// Object"); a header's name is case-insensitive (RFC 9110
			// §5.1).
			overridden := map[paramKey]bool{}
			for _, o := range own {
				overridden[o.key()] = true
			}
			params := slices.Clone(own)
			for _, sp := range shared {
				if !overridden[sp.key()] {
					params = append(params, sp)
				}
			}
			l.split(op, params, consumes(om, m))
			if !l.swagger {
				op.Body = l.requestBody(opAt.child("requestBody"), om["requestBody"])
			}
			op.Responses = l.responses(opAt.child("responses"), om["responses"], produces(om, m))
			op.Security = l.security(top, m, opAt, om)
			doc.Operations = append(doc.Operations, op)
			if l.work > maxWork {
				return
			}
		}
	}
}

// paramKey is what makes a parameter unique: its name and location.
type paramKey struct{ name, in string }

func (p *param) key() paramKey {
	switch p.In {
	case apidoc.InHeader:
		return paramKey{strings.ToLower(p.Name), p.In}
	case "body":
		// There is one body (2.0 "Parameter Object": at most one body
		// parameter), whatever each is named: the operation's overrides
		// its path's.
		return paramKey{"", p.In}
	}
	return paramKey{p.Name, p.In}
}

// param is a parameter as read, before the body parameters of 2.0 are
// moved into the body.
type param struct {
	apidoc.Parameter
	at  loc
	raw map[string]any
}

func (l *loader) parameters(at loc, v any) []*param {
	var out []*param
	for i, e := range list(v) {
		if !l.spend(1) {
			return out
		}
		pat, pm, ok := l.follow(at.child(strconv.Itoa(i)), e)
		if !ok {
			continue
		}
		p := &param{at: pat, raw: pm}
		p.Name, p.In, p.Description, p.Source = str(pm["name"]), str(pm["in"]), str(pm["description"]), l.source(pat)
		p.Required, _ = pm["required"].(bool)
		if p.Name == "" || p.In == "" {
			l.problem(pat, "a parameter needs a name and an in")
			continue
		}
		if !l.swagger && p.In == apidoc.InHeader && slices.Contains([]string{"accept", "content-type", "authorization"}, strings.ToLower(p.Name)) {
			// OAS 3.0.3 §4.7.12.1 and 3.1 §4.8.12.1: a header parameter
			// named Accept, Content-Type or Authorization "SHALL be
			// ignored" (the media types and the security schemes say
			// those). A credential declared that way is said, so that it
			// is not lost without a word.
			if strings.EqualFold(p.Name, "authorization") {
				l.problem(pat, "a header parameter named Authorization is ignored (OpenAPI 3: the security schemes declare credentials)")
			}
			continue
		}
		out = append(out, p)
	}
	return out
}

// split places the parameters: path, query, header and cookie ones on the
// operation; 2.0's body parameter and formData ones in its body.
func (l *loader) split(op *apidoc.Operation, params []*param, consumes []string) {
	var form []*param
	for _, p := range params {
		switch p.In {
		case "body":
			if !l.swagger {
				l.problem(p.at, "in: body is OpenAPI 2.0's; a 3.x document declares a requestBody")
				continue
			}
			if op.Body != nil {
				l.problem(p.at, "a second body parameter: OpenAPI 2.0 allows one, and which the service reads is unknown")
				continue
			}
			op.Body = &apidoc.Body{MediaType: pick(consumes), MediaTypes: consumes, Required: p.Required, Schema: l.schema(p.at.child("schema"), p.raw["schema"]), Source: l.source(p.at)}
		case "formData":
			form = append(form, p)
		case apidoc.InPath, apidoc.InQuery, apidoc.InHeader, apidoc.InCookie:
			q := p.Parameter
			switch {
			case p.raw["schema"] != nil:
				q.Schema = l.schema(p.at.child("schema"), p.raw["schema"])
			case p.raw["content"] != nil:
				if content, ok := p.raw["content"].(map[string]any); ok {
					mt := pick(slices.Sorted(maps.Keys(content)))
					if cm, ok := content[mt].(map[string]any); ok {
						q.Schema = l.schema(p.at.child("content", mt, "schema"), cm["schema"])
					}
				}
			default:
				// 2.0 declares a parameter's type on the parameter.
				q.Schema = l.schemaOf(p.at, p.raw)
			}
			if p.In == apidoc.InPath {
				q.Required = true
			}
			q.Style, q.Repeated = l.style(p)
			op.Parameters = append(op.Parameters, &q)
		default:
			l.problem(p.at, "a parameter in %q is not one this compiler knows (path, query, header, cookie%s)", p.In,
				map[bool]string{true: ", body, formData"}[l.swagger])
		}
	}
	if len(form) > 0 {
		s := &apidoc.Schema{Source: l.source(form[0].at), Types: []string{"object"}}
		mt := "application/x-www-form-urlencoded"
		for _, p := range form {
			fs := l.schemaOf(p.at, p.raw)
			if str(p.raw["type"]) == "file" || slices.Contains(consumes, "multipart/form-data") {
				mt = "multipart/form-data"
			}
			s.Properties = append(s.Properties, apidoc.Property{Name: p.Name, Schema: fs})
			if p.Required {
				s.Required = append(s.Required, p.Name)
			}
		}
		op.Body = &apidoc.Body{MediaType: mt, MediaTypes: []string{mt}, Required: len(s.Required) > 0, Schema: s, Source: s.Source}
	}
}

// requestBody reads a 3.x requestBody.
func (l *loader) requestBody(at loc, v any) *apidoc.Body {
	if v == nil {
		return nil
	}
	bat, bm, ok := l.follow(at, v)
	if !ok {
		return nil
	}
	b := &apidoc.Body{Source: l.source(bat)}
	b.Required, _ = bm["required"].(bool)
	content, _ := bm["content"].(map[string]any)
	if !l.spend(1 + len(content)) {
		return nil
	}
	b.MediaTypes = slices.Sorted(maps.Keys(content))
	b.MediaType = pick(b.MediaTypes)
	if cm, ok := content[b.MediaType].(map[string]any); ok && cm["schema"] != nil {
		b.Schema = l.schema(bat.child("content", b.MediaType, "schema"), cm["schema"])
	}
	return b
}

// responses reads the declared responses, statuses sorted.
func (l *loader) responses(at loc, v any, produces []string) []*apidoc.Response {
	rm, _ := v.(map[string]any)
	var out []*apidoc.Response
	for _, status := range slices.Sorted(maps.Keys(rm)) {
		if strings.HasPrefix(status, "x-") {
			continue
		}
		rat, r, ok := l.follow(at.child(status), rm[status])
		if !ok {
			continue
		}
		h, _ := r["headers"].(map[string]any)
		if !l.spend(1 + len(h)) {
			return out
		}
		resp := &apidoc.Response{Status: status, Description: str(r["description"]), Source: l.source(rat)}
		if len(h) > 0 {
			resp.Headers = slices.Sorted(maps.Keys(h))
		}
		if l.swagger {
			if r["schema"] != nil {
				resp.MediaType = pick(produces)
				resp.Schema = l.schema(rat.child("schema"), r["schema"])
			}
		} else if content, ok := r["content"].(map[string]any); ok && len(content) > 0 {
			resp.MediaType = pick(slices.Sorted(maps.Keys(content)))
			if cm, ok := content[resp.MediaType].(map[string]any); ok && cm["schema"] != nil {
				resp.Schema = l.schema(rat.child("content", resp.MediaType, "schema"), cm["schema"])
			} else {
				// Content with no schema: a body whose shape is not
				// declared.
				resp.Schema = &apidoc.Schema{Source: l.source(rat.child("content", resp.MediaType))}
			}
		}
		out = append(out, resp)
	}
	return out
}

// security reads the requirement in force: the operation's own when it has
// one (an empty list included), else the document's.
func (l *loader) security(top loc, m map[string]any, opAt loc, om map[string]any) *apidoc.Security {
	at, v := opAt.child("security"), om["security"]
	if v == nil {
		at, v = top.child("security"), m["security"]
		if v == nil {
			return nil
		}
	}
	reqs, ok := v.([]any)
	if !ok {
		l.problem(at, "security must be a list of requirements")
		return nil
	}
	s := &apidoc.Security{Source: l.source(at), Alternatives: []apidoc.Requirement{}}
	for i, r := range reqs {
		rm, ok := r.(map[string]any)
		if !ok {
			l.problem(at.child(strconv.Itoa(i)), "a security requirement must be an object")
			continue
		}
		if !l.spend(1 + len(rm)) {
			return s
		}
		req := apidoc.Requirement{Source: l.source(at.child(strconv.Itoa(i)))}
		for _, name := range slices.Sorted(maps.Keys(rm)) {
			req.Schemes = append(req.Schemes, apidoc.SchemeUse{Name: name, Scopes: strs(rm[name])})
		}
		s.Alternatives = append(s.Alternatives, req)
	}
	return s
}

// consumes and produces are 2.0's media types, the operation's or the
// document's.
func consumes(om, m map[string]any) []string {
	if c := strs(om["consumes"]); len(c) > 0 {
		return c
	}
	if c := strs(m["consumes"]); len(c) > 0 {
		return c
	}
	return []string{"application/json"}
}

func produces(om, m map[string]any) []string {
	if c := strs(om["produces"]); len(c) > 0 {
		return c
	}
	if c := strs(m["produces"]); len(c) > 0 {
		return c
	}
	return []string{"application/json"}
}

// pick chooses the media type the compiler reads: application/json, else a
// +json one, else the first.
func pick(types []string) string {
	if len(types) == 0 {
		return ""
	}
	for _, t := range types {
		if strings.EqualFold(base(t), "application/json") {
			return t
		}
	}
	for _, t := range types {
		if strings.HasSuffix(strings.ToLower(base(t)), "+json") {
			return t
		}
	}
	return types[0]
}

func base(mt string) string { return strings.TrimSpace(strings.SplitN(mt, ";", 2)[0]) }

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// style reads how a parameter writes an array or object: 2.0's
// collectionFormat (csv by default), 3.x's style and explode (form and
// exploded in a query or cookie, simple and not exploded in a path or
// header, by default).
func (l *loader) style(p *param) (string, bool) {
	if l.swagger {
		f := str(p.raw["collectionFormat"])
		if f == "" {
			f = "csv"
		}
		return f, f == "multi"
	}
	style := str(p.raw["style"])
	if style == "" {
		style = "simple"
		if p.In == apidoc.InQuery || p.In == apidoc.InCookie {
			style = "form"
		}
	}
	explode, said := p.raw["explode"].(bool)
	if !said {
		explode = style == "form"
	}
	spelled := style
	if explode != (style == "form") {
		spelled = fmt.Sprintf("%s, explode: %v", style, explode)
	}
	return spelled, explode && (style == "form" || style == "spaceDelimited" || style == "pipeDelimited")
}
