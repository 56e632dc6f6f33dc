package policy

import (
	"bytes"
	"encoding/json"

	"github.com/orangerail/orangerail/internal/ontology"
)

// ManifestFormat names the manifest's format and version; a reader
// refuses any other.
const ManifestFormat = "orangerail.policy/v1"

// Manifest is a compiled policy: one ToolPolicy per operation of an API
// description, every value carrying where it came from and the rule that
// produced it, so that a team can review it line by line.
type Manifest struct {
	Format  string `json:"format"`
	Service string `json:"service"`
	Source  Source `json:"source"`
	// Schemes lists every security scheme the description declares: where
	// orangerail places its credential, and the variable it reads it from.
	Schemes []SchemePolicy `json:"schemes"`
	Tools   []ToolPolicy   `json:"tools"`
	// Requirements are what a deployed service must do that no compiled
	// policy can: recorded, never reported as satisfied.
	Requirements []Requirement `json:"requirements"`
	// Problems are parts of the description that could not be read.
	Problems []Problem `json:"problems"`
}

// Source describes the document a manifest was compiled from. File is its
// base name only: a manifest compiled on two machines is the same bytes.
type Source struct {
	File       string `json:"file"`
	SHA256     string `json:"sha256"`
	Format     string `json:"format"`
	Version    string `json:"version"`
	Title      string `json:"title"`
	APIVersion string `json:"api_version"`
}

// Derived is one value of a policy with its provenance: the places in the
// source it was read from (JSON pointers, or WSDL QNames) and the rule
// that produced it, in words.
type Derived[T any] struct {
	Value  T        `json:"value"`
	Source []string `json:"source"`
	Rule   string   `json:"rule"`
}

func derive[T any](v T, rule string, source ...string) Derived[T] {
	if source == nil {
		source = []string{}
	}
	return Derived[T]{Value: v, Source: source, Rule: rule}
}

// Status is whether a tool may be served, from a closed set.
type Status string

// The statuses.
const (
	// StatusServable: nothing fatal is unresolved, or a person accepted it.
	StatusServable Status = "servable"
	// StatusFailsClosed: something fatal is unresolved; no action is
	// written for the operation.
	StatusFailsClosed Status = "fails_closed"
)

// Operation names the operation a tool calls.
type Operation struct {
	ID     string `json:"id"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// SOAP is a WSDL operation's binding.
	SOAP   *SOAPOperation `json:"soap,omitempty"`
	Source string         `json:"source"`
}

// SOAPOperation is how a WSDL operation is called.
type SOAPOperation struct {
	Version   string `json:"version"`
	Style     string `json:"style"`
	Use       string `json:"use"`
	Action    string `json:"action"`
	Namespace string `json:"namespace"`
	Element   string `json:"element"`
	Binding   string `json:"binding"`
}

// Rate is the call budget of a tool (spec 001, "Call budgets").
type Rate struct {
	CallsPerMinute  int `json:"calls_per_minute"`
	MaxConcurrent   int `json:"max_concurrent"`
	DailyCallBudget int `json:"daily_call_budget"`
}

// LogClass is how much of a call its audit records keep, from a closed
// set.
type LogClass string

// The log classes.
const (
	// LogFull keeps arguments and results as they are: nothing in them
	// was judged sensitive.
	LogFull LogClass = "full"
	// LogRedacted keeps them with redact_fields masked.
	LogRedacted LogClass = "redacted"
	// LogMetadataOnly keeps who called what and when, every argument and
	// result member masked: the operation handles credentials as its
	// purpose.
	LogMetadataOnly LogClass = "metadata_only"
)

// Field says which part of a call a redacted field is in.
type Field string

// The parts of a call.
const (
	// FieldParameter: a path, query, header or cookie parameter, its
	// pointer /name.
	FieldParameter Field = "parameter"
	// FieldBody: inside the request body (a SOAP call's input element).
	FieldBody Field = "body"
	// FieldResponse: inside a successful response's body (a SOAP call's
	// output element).
	FieldResponse Field = "response"
)

// RedactField is one value audit records mask: a JSON pointer into a part
// of the call as the description declares it, "*" standing for every
// element of an array (or every member of a map).
type RedactField struct {
	In          Field       `json:"in"`
	Pointer     string      `json:"pointer"`
	Sensitivity Sensitivity `json:"sensitivity"`
}

// SchemeRef is one credential a tool presents: the scheme, where it goes
// and the variable holding it.
type SchemeRef struct {
	Scheme    string `json:"scheme"`
	Placement string `json:"placement"`
	Env       string `json:"env"`
}

// Annotations are the MCP tool hints, each derived from a classification
// that carries provenance. openWorldHint is deliberately absent: nothing
// in an OpenAPI or WSDL document answers it.
type Annotations struct {
	ReadOnlyHint    Derived[bool] `json:"readOnlyHint"`
	DestructiveHint Derived[bool] `json:"destructiveHint"`
	IdempotentHint  Derived[bool] `json:"idempotentHint"`
	// SensitiveHint is null, not false, where no sensitivity was
	// established: false would be a claim nobody made.
	SensitiveHint Derived[*bool] `json:"x-orangerail/sensitiveHint"`
	// ReversibleHint is present only when the rollback guidance says the
	// effect cannot be undone, and then false.
	ReversibleHint *Derived[bool] `json:"x-orangerail/reversibleHint,omitempty"`
}

// Output bounds what an upstream's answer may be.
type Output struct {
	MaxBytes Derived[int64] `json:"max_bytes"`
}

// ToolPolicy is the compiled policy of one operation.
type ToolPolicy struct {
	Name      string                           `json:"name"`
	Operation Operation                        `json:"operation"`
	Status    Derived[Status]                  `json:"status"`
	Risk      Derived[ontology.Risk]           `json:"risk"`
	Approval  Derived[ontology.ApprovalPolicy] `json:"approval"`
	Retry     Derived[ontology.HTTPRetry]      `json:"retry"`
	// IdempotencyKeyRequired is true when every call carries a key;
	// IdempotencyHeader names the header, empty when none is sent.
	IdempotencyKeyRequired Derived[bool]     `json:"idempotency_key_required"`
	IdempotencyHeader      Derived[string]   `json:"idempotency_header"`
	Rate                   Derived[Rate]     `json:"rate"`
	LogClass               Derived[LogClass] `json:"log_class"`
	// Sensitivity is null where nothing could be established.
	Sensitivity         Derived[*Sensitivity]  `json:"sensitivity"`
	RedactFields        []Derived[RedactField] `json:"redact_fields"`
	Output              Output                 `json:"output"`
	AllowedEnvironments Derived[[]string]      `json:"allowed_environments"`
	RequiredScopes      Derived[[]string]      `json:"required_scopes"`
	RequiredSchemes     Derived[[]SchemeRef]   `json:"required_schemes"`
	Annotations         Annotations            `json:"annotations"`
	Effect              Derived[string]        `json:"effect"`
	Rollback            Derived[string]        `json:"rollback"`
	// Unresolved lists everything the compiler could not demonstrate.
	Unresolved []Unresolved `json:"unresolved"`
}

// SchemePolicy is one declared security scheme as orangerail places it.
type SchemePolicy struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Placement says where the credential goes; empty when it cannot be
	// placed, and then Rule says why: it is never guessed.
	Placement string `json:"placement"`
	// Auth is the ontology's auth type for it ("" when unplaceable).
	Auth   ontology.AuthType `json:"auth"`
	Env    string            `json:"env"`
	Source []string          `json:"source"`
	Rule   string            `json:"rule"`
}

// Requirement is a property of the deployed service that a compiled
// policy cannot give.
type Requirement struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Problem is a part of the description that could not be read.
type Problem struct {
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Marshal returns the manifest's bytes: indented JSON ending in a newline,
// the same bytes for the same manifest on every run.
func (m *Manifest) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
