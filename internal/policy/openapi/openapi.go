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
	"io/fs"
	"maps"
	"path"
	"slices"
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
	l := &loader{fsys: fsys, main: path.Clean(name), files: map[string]any{path.Clean(name): root}, schemas: map[string]*apidoc.Schema{}}
	doc := &apidoc.Document{Schemes: map[string]*apidoc.Scheme{}}
	switch v := str(m["openapi"]); {
	case strings.HasPrefix(v, "3.0.") || strings.HasPrefix(v, "3.1.") || v == "3.0" || v == "3.1":
		doc.Format, doc.Version = apidoc.OpenAPI, v
	case m["openapi"] != nil:
		return nil, fmt.Errorf("%w: it says openapi %q; this compiler reads 2.0, 3.0 and 3.1", ErrNotOpenAPI, v)
	case str(m["swagger"]) == "2.0":
		doc.Format, doc.Version, l.swagger = apidoc.Swagger, "2.0", true
	case m["swagger"] != nil:
		return nil, fmt.Errorf("%w: it says swagger %q; this compiler reads 2.0", ErrNotOpenAPI, str(m["swagger"]))
	default:
		return nil, fmt.Errorf("%w: it has no openapi or swagger member naming its version", ErrNotOpenAPI)
	}
	if info, ok := m["info"].(map[string]any); ok {
		doc.Title, doc.APIVersion = str(info["title"]), str(info["version"])
	}
	top := l.at(l.main, "")
	doc.Servers = l.servers(top, m)
	l.securitySchemes(doc, top, m)
	l.operations(doc, top, m)
	doc.Problems = l.problems
	return doc, nil
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
	files   map[string]any
	// schemas holds each schema read at a place, so that a definition
	// $ref'd twice is one *Schema and a recursive one a cycle.
	schemas  map[string]*apidoc.Schema
	nodes    int
	problems []apidoc.Problem
}

// maxSchemas bounds the schemas one document may make.
const maxSchemas = 500_000

func (l *loader) problem(at loc, format string, args ...any) {
	l.problems = append(l.problems, apidoc.Problem{Source: l.source(at), Message: fmt.Sprintf(format, args...)})
}

// file returns a file's decoded root, reading it once.
func (l *loader) file(name string) (any, error) {
	if v, ok := l.files[name]; ok {
		return v, nil
	}
	if l.fsys == nil {
		return nil, errors.New("no directory to read it from")
	}
	data, err := fs.ReadFile(l.fsys, name)
	if err != nil {
		return nil, err
	}
	v, err := decode(data)
	if err != nil {
		return nil, err
	}
	l.files[name] = v
	return v, nil
}

// get returns the value at a place, or false.
func (l *loader) get(at loc) (any, bool) {
	v, err := l.file(at.file)
	if err != nil {
		return nil, false
	}
	if at.ptr == "" {
		return v, true
	}
	for _, token := range strings.Split(at.ptr[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[token]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i := 0
			if _, err := fmt.Sscan(token, &i); err != nil || i < 0 || i >= len(node) || fmt.Sprint(i) != token {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// target reads a $ref: the place it names, relative to from's file.
func (l *loader) target(from loc, ref string) (loc, error) {
	file, frag, _ := strings.Cut(ref, "#")
	if strings.Contains(file, "://") || strings.HasPrefix(file, "//") {
		return loc{}, fmt.Errorf("the $ref %q names a URL: the compiler reads no network", ref)
	}
	name := from.file
	if file != "" {
		name = path.Join(path.Dir(from.file), file)
		if !fs.ValidPath(name) {
			return loc{}, fmt.Errorf("the $ref %q names a file outside the document's directory", ref)
		}
	}
	frag = strings.ReplaceAll(frag, "%7B", "{")
	frag = strings.ReplaceAll(frag, "%7D", "}")
	frag = strings.ReplaceAll(frag, "%25", "%")
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return loc{}, fmt.Errorf("the $ref %q does not end in a JSON pointer", ref)
	}
	return loc{name, frag}, nil
}

// follow resolves an object that may be a $ref (a parameter, a response,
// a request body, a path item, a scheme), through a chain of them, to the
// object itself and its place.
func (l *loader) follow(at loc, v any) (loc, map[string]any, bool) {
	for hops := 0; ; hops++ {
		m, ok := v.(map[string]any)
		if !ok {
			l.problem(at, "expected an object")
			return at, nil, false
		}
		ref, isRef := m["$ref"].(string)
		if !isRef {
			return at, m, true
		}
		if hops == 32 {
			l.problem(at, "$ref chains more than 32 times (a cycle?)")
			return at, nil, false
		}
		next, err := l.target(at, ref)
		if err != nil {
			l.problem(at, "%v", err)
			return at, nil, false
		}
		if v, ok = l.get(next); !ok {
			l.problem(at, "the $ref %q names nothing", ref)
			return at, nil, false
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

// operations reads every path's operations, paths sorted.
func (l *loader) operations(doc *apidoc.Document, top loc, m map[string]any) {
	paths, _ := m["paths"].(map[string]any)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if !strings.HasPrefix(p, "/") {
			continue // an x- extension
		}
		itemAt, item, ok := l.follow(top.child("paths", p), paths[p])
		if !ok {
			continue
		}
		shared := l.parameters(itemAt.child("parameters"), item["parameters"])
		for _, method := range methods {
			om, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			opAt := itemAt.child(method)
			op := &apidoc.Operation{ID: str(om["operationId"]), Source: l.source(opAt), Method: strings.ToUpper(method), Path: p,
				Summary: str(om["summary"]), Description: str(om["description"]), Tags: strs(om["tags"])}
			op.Deprecated, _ = om["deprecated"].(bool)
			own := l.parameters(opAt.child("parameters"), om["parameters"])
			params := slices.Clone(own)
			for _, sp := range shared {
				if !slices.ContainsFunc(own, func(o *param) bool { return o.Name == sp.Name && o.In == sp.In }) {
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
		}
	}
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
		pat, pm, ok := l.follow(at.child(fmt.Sprint(i)), e)
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
		resp := &apidoc.Response{Status: status, Description: str(r["description"]), Source: l.source(rat)}
		if h, ok := r["headers"].(map[string]any); ok {
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
			l.problem(at.child(fmt.Sprint(i)), "a security requirement must be an object")
			continue
		}
		req := apidoc.Requirement{Source: l.source(at.child(fmt.Sprint(i)))}
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
