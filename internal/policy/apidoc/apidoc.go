// Package apidoc is an API description as the policy compiler reads it:
// the operations of an OpenAPI (2.0, 3.0, 3.1) or WSDL 1.1 document, their
// parameters, bodies, responses and security, every $ref resolved, and
// every part carrying the place in its source it was read from, so that
// each value the compiler derives can name where it came from.
//
// The loaders (internal/policy/openapi, internal/policy/wsdl) make a
// Document; internal/policy compiles it. Nothing here reads a file or the
// network.
package apidoc

// Format is the kind of description a document is.
type Format string

// The formats.
const (
	Swagger Format = "swagger" // OpenAPI 2.0
	OpenAPI Format = "openapi" // OpenAPI 3.0 and 3.1
	WSDL    Format = "wsdl"    // WSDL 1.1
)

// Document is one API description, read.
type Document struct {
	Format Format
	// Version is the description format's version: "2.0", "3.0.3",
	// "3.1.0", "1.1".
	Version string
	// Title and APIVersion are info.title and info.version (WSDL: the
	// service's name; no version).
	Title, APIVersion string
	// Servers are where the API is served, as the description lists them
	// (OpenAPI servers, Swagger host+basePath+schemes, WSDL soap:address).
	Servers []Server
	// Schemes are the security schemes the description declares, by name.
	Schemes map[string]*Scheme
	// Operations in a fixed order: by path, then method in OpenAPI's
	// order (get, put, post, delete, options, head, patch, trace), for
	// OpenAPI, whose decoded objects keep no order; by binding, then
	// operation as written, for WSDL.
	Operations []*Operation
	// Problems are parts of the document the loader could not read, each
	// at its place: a $ref that names nothing, a binding with no port. A
	// problem is never fatal to the whole document; the compiler reports
	// it beside the operations it touches.
	Problems []Problem
}

// Problem is a part of a document that could not be read.
type Problem struct {
	Source  string // a JSON pointer or WSDL QName
	Message string
}

// Server is one place the API is served.
type Server struct {
	URL         string
	Description string
	Source      string
}

// Operation is one call the API offers: an OpenAPI path item's method, or
// a WSDL binding's operation.
type Operation struct {
	// ID is the operationId (OpenAPI) or the operation's name (WSDL).
	// Empty when the description gives none; the compiler names it then.
	ID string
	// Source is where the operation is declared: "/paths/~1pets/get", or
	// "{namespace}Binding/operation" for WSDL.
	Source string
	// Method and Path are an HTTP operation's (Method upper case); empty
	// for SOAP.
	Method, Path string
	Summary      string
	Description  string
	Tags         []string
	Deprecated   bool
	// Parameters are the path, query, header and cookie parameters, the
	// path item's and the operation's merged (the operation's win).
	Parameters []*Parameter
	// Body is the request body: nil when the operation takes none.
	Body *Body
	// Responses are the declared responses, by status, sorted.
	Responses []*Response
	// Security is the requirement in force: the operation's own, else the
	// document's; nil when neither declares one.
	Security *Security
	// SOAP is a WSDL operation's binding; nil for HTTP.
	SOAP *SOAPBinding
	// Servers are where the operation is served when it says so itself
	// (OAS 3: its own servers, else its path item's); nil: the
	// description's.
	Servers []Server
}

// Parameter is one named input outside the body.
type Parameter struct {
	Name string
	// In is path, query, header or cookie (or formData for a Swagger 2.0
	// form parameter, which the loader moves into the Body instead).
	In          string
	Required    bool
	Description string
	Schema      *Schema
	Source      string
	// Style is how an array or object value is written, as the
	// description says or its default: 2.0's collectionFormat (csv,
	// multi …), 3.x's style with explode: false said ("form, explode:
	// false"). Repeated is whether an array is the parameter repeated
	// (2.0's multi, 3.x's form exploded).
	Style    string
	Repeated bool
}

// Parameter placements.
const (
	InPath   = "path"
	InQuery  = "query"
	InHeader = "header"
	InCookie = "cookie"
)

// Body is a request body (OpenAPI requestBody, a Swagger body or formData
// parameters, a SOAP input message).
type Body struct {
	// MediaType is the one the compiler reads: application/json when
	// offered, else the first listed.
	MediaType string
	// MediaTypes lists every media type offered, as written.
	MediaTypes []string
	Required   bool
	Schema     *Schema
	Source     string
}

// Response is one declared response.
type Response struct {
	// Status is "200", "2XX" or "default".
	Status      string
	Description string
	MediaType   string
	// Schema is nil when the response declares no content.
	Schema *Schema
	// Headers are the response headers it declares, by name.
	Headers []string
	Source  string
}

// Security is an OR of requirements: any one alternative suffices.
type Security struct {
	// Source is where the requirement list is written.
	Source string
	// Declared is false when no security was declared at all (Security is
	// then nil); an empty Alternatives with a Source means `security: []`,
	// an explicit "no authentication".
	Alternatives []Requirement
}

// Requirement is an AND of schemes: every one must be presented. An empty
// Requirement ({}) allows an anonymous call.
type Requirement struct {
	Source  string
	Schemes []SchemeUse
}

// SchemeUse names one scheme a requirement needs, with the scopes it needs
// the credential to hold.
type SchemeUse struct {
	Name   string
	Scopes []string
}

// SchemeType is how a security scheme authenticates.
type SchemeType string

// The scheme types OpenAPI defines (Swagger 2.0's basic is HTTP with
// Scheme basic).
const (
	SchemeAPIKey        SchemeType = "apiKey"
	SchemeHTTP          SchemeType = "http"
	SchemeOAuth2        SchemeType = "oauth2"
	SchemeOpenIDConnect SchemeType = "openIdConnect"
	SchemeMutualTLS     SchemeType = "mutualTLS"
)

// Scheme is one declared security scheme.
type Scheme struct {
	Name string
	Type SchemeType
	// In and ParamName place an apiKey: header, query or cookie.
	In, ParamName string
	// HTTPScheme is an http scheme's scheme, lower case: basic, bearer,
	// digest …
	HTTPScheme string
	// Flows are an oauth2 scheme's flows, in the order OAuth names them:
	// implicit, password, clientCredentials, authorizationCode.
	Flows []Flow
	// OpenIDConnectURL is an openIdConnect scheme's discovery URL.
	OpenIDConnectURL string
	Description      string
	Source           string
}

// Flow is one OAuth 2.0 flow of a scheme.
type Flow struct {
	// Name is implicit, password, clientCredentials or authorizationCode
	// (Swagger 2.0's application and accessCode are read as the last two).
	Name             string
	AuthorizationURL string
	TokenURL         string
	RefreshURL       string
	// Scopes are the scopes the flow offers, sorted.
	Scopes []string
}

// Scopes returns every scope the scheme's flows offer, each once, sorted.
func (s *Scheme) Scopes() []string {
	set := map[string]bool{}
	for _, f := range s.Flows {
		for _, sc := range f.Scopes {
			set[sc] = true
		}
	}
	out := make([]string, 0, len(set))
	for sc := range set {
		out = append(out, sc)
	}
	sortStrings(out)
	return out
}

// SOAPBinding is how a WSDL operation is called.
type SOAPBinding struct {
	// Version is "1.1" or "1.2".
	Version string
	// Style is document or rpc; Use is literal or encoded.
	Style, Use string
	// Action is the soapAction (may be empty).
	Action string
	// Binding and Port name the binding and the port it is served on;
	// Address is the port's soap:address location.
	Binding, Port, Address string
	// Namespace and Element are the QName of the Body's child: the input
	// message's element (document) or the operation with the binding's
	// namespace (rpc).
	Namespace, Element string
	// Others names the other bindings that serve the same operation (a
	// SOAP 1.2 twin, HTTP GET and POST bindings): not called, but listed
	// so the manifest can say which one it chose.
	Others []string
}

// Schema is a JSON Schema (or an XML Schema type read as one), its $refs
// resolved: a Schema reached through a $ref is the definition itself,
// shared, so a recursive definition is a cycle of pointers. Walk one with
// a visited set.
type Schema struct {
	// Source is where the schema is written.
	Source string
	// Ref is the $ref this schema was reached through ("" when written in
	// place): the definition's name for an emitted $defs.
	Ref string
	// Types lists the JSON types allowed ("null" included when nullable);
	// empty when the schema does not say.
	Types       []string
	Format      string
	Title       string
	Description string
	// Properties in the order written.
	Properties []Property
	Required   []string
	// AdditionalProperties is nil when unspecified, a Schema (the empty
	// one for true) otherwise; NoAdditional when false.
	AdditionalProperties *Schema
	NoAdditional         bool
	Items                *Schema
	AllOf, AnyOf, OneOf  []*Schema
	// Mapping lists a discriminator's mapped schemas, as well as any the
	// oneOf/anyOf names.
	Mapping  []*Schema
	Enum     []any
	Const    any
	HasConst bool
	Minimum  *float64
	Maximum  *float64
	// ExclusiveMinimum and ExclusiveMaximum are bounds (3.1's numbers;
	// 3.0's booleans are folded into them by the loader).
	ExclusiveMinimum *float64
	ExclusiveMaximum *float64
	MinLength        *int
	MaxLength        *int
	Pattern          string
	MinItems         *int
	MaxItems         *int
	ReadOnly         bool
	WriteOnly        bool
	Deprecated       bool
	// The other assertions JSON Schema makes: patternProperties in the
	// order written, not, multipleOf, uniqueItems, min/maxProperties.
	PatternProperties []Property
	Not               *Schema
	MultipleOf        *float64
	UniqueItems       bool
	MinProperties     *int
	MaxProperties     *int

	// PatternXSD says Pattern is an XML Schema regular expression (a
	// WSDL's pattern facet, which matches the whole value), not an
	// ECMA-262 one.
	PatternXSD bool
	// WhiteSpace is an XML Schema type's whiteSpace facet, "replace" or
	// "collapse" ("" for preserve, and for every JSON Schema): XML Schema
	// checks the facets above on the value normalised so, not as sent.
	WhiteSpace string
	// XMLList says the schema, an array, is an XML Schema list type's
	// (xs:list): one element whose text is the items joined by spaces,
	// not an element repeated once per item (maxOccurs > 1).
	XMLList bool
}

// Property is one named member of an object schema.
type Property struct {
	Name   string
	Schema *Schema
}

// Property returns the named property's schema, or nil.
func (s *Schema) Property(name string) *Schema {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// Members lists an object schema's properties, its own and those of its
// allOf parts — and of its anyOf and oneOf alternatives too when
// alternatives is set — each part entered once, so that a definition
// composed of itself (a pointer cycle) ends.
func (s *Schema) Members(alternatives bool) []Property {
	var out []Property
	seen := map[*Schema]bool{}
	var walk func(s *Schema)
	walk = func(s *Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s.Properties...)
		groups := [][]*Schema{s.AllOf}
		if alternatives {
			groups = append(groups, s.AnyOf, s.OneOf)
		}
		for _, group := range groups {
			for _, sub := range group {
				walk(sub)
			}
		}
	}
	walk(s)
	return out
}
