package policy

// UnresolvedKind is what the compiler could not demonstrate, from a closed
// set.
type UnresolvedKind string

// The kinds of unresolved finding.
const (
	// UnresolvedUnauthenticated: no credential is needed to call the
	// operation (no security declared, `security: []`, or an anonymous
	// alternative). Fatal for an operation that changes state: it cannot
	// be shown to be governed.
	UnresolvedUnauthenticated UnresolvedKind = "unauthenticated"
	// UnresolvedScopeless: least privilege chose a credential with no
	// scopes, whose breadth nothing in the description shows. Fatal for
	// an operation that changes state.
	UnresolvedScopeless UnresolvedKind = "scopeless"
	// UnresolvedUnknownScheme: a requirement names a scheme the
	// description does not declare; that alternative cannot be used.
	UnresolvedUnknownScheme UnresolvedKind = "unknown_scheme"
	// UnresolvedUndeclaredScope: a requirement names a scope its scheme's
	// flows do not offer.
	UnresolvedUndeclaredScope UnresolvedKind = "undeclared_scope"
	// UnresolvedBroadScopes: the narrowest scoped alternative still needs
	// every scope its scheme offers.
	UnresolvedBroadScopes UnresolvedKind = "broad_scopes"
	// UnresolvedUnplaceableScheme: a chosen scheme has no placement
	// orangerail can make; nothing is sent for it.
	UnresolvedUnplaceableScheme UnresolvedKind = "unplaceable_scheme"
	// UnresolvedCredentialParameter: a parameter carries a credential
	// the description does not declare as a scheme, so an agent would
	// have to hold it. Fatal, and not acceptable: orangerail places
	// credentials from its environment only.
	UnresolvedCredentialParameter UnresolvedKind = "credential_parameter" //nolint:gosec // G101: a finding's kind, not a credential
	// UnresolvedInferredRead: a read was inferred from the operation's
	// name, over a method or protocol that does not say it reads.
	UnresolvedInferredRead UnresolvedKind = "inferred_read"
	// UnresolvedStateChangingRead: a safe method's operation is named as
	// changing state.
	UnresolvedStateChangingRead UnresolvedKind = "state_changing_read"
	// UnresolvedIdempotency: whether repeating the call is harmless could
	// not be determined; it is attempted once.
	UnresolvedIdempotency UnresolvedKind = "idempotency_unknown"
	// UnresolvedSensitivity: some of the call's input or output could not
	// be judged by name.
	UnresolvedSensitivity UnresolvedKind = "sensitivity_unjudged"
	// UnresolvedUnsupported: orangerail's effects cannot make the call as
	// the description declares it (a form or XML body, SOAP rpc or
	// encoded). Fatal, and not acceptable.
	UnresolvedUnsupported UnresolvedKind = "unsupported"
	// UnresolvedRenamed: the operation's id is not a tool name, or
	// collides with another's, and was renamed.
	UnresolvedRenamed UnresolvedKind = "renamed"
	// UnresolvedDocument: the loader could not read a part of the
	// description this operation uses (a $ref that names nothing, in the
	// operation or in a component it reaches): what the part would have
	// said is missing, not defaulted. Fatal, and acceptable by a person
	// who has read what is missing.
	UnresolvedDocument UnresolvedKind = "document_problem"
)

// UnresolvedKinds returns every kind; the manifest's JSON Schema enum is
// this list (a test holds them equal).
func UnresolvedKinds() []UnresolvedKind {
	return []UnresolvedKind{UnresolvedUnauthenticated, UnresolvedScopeless, UnresolvedUnknownScheme,
		UnresolvedUndeclaredScope, UnresolvedBroadScopes, UnresolvedUnplaceableScheme, UnresolvedCredentialParameter,
		UnresolvedInferredRead, UnresolvedStateChangingRead, UnresolvedIdempotency, UnresolvedSensitivity,
		UnresolvedUnsupported, UnresolvedRenamed, UnresolvedDocument}
}

// Unresolved is one thing the compiler could not demonstrate about a
// tool. It is listed, never silently defaulted.
type Unresolved struct {
	Kind UnresolvedKind `json:"kind"`
	// Field names the policy field it bears on.
	Field  string   `json:"field"`
	Source []string `json:"source"`
	Detail string   `json:"detail"`
	// Fatal: while it stands, the tool fails closed.
	Fatal bool `json:"fatal"`
	// Acceptable: a person may accept it (policy compile --accept), and
	// Accepted then holds their reason and the tool is served.
	Acceptable bool   `json:"acceptable"`
	Accepted   string `json:"accepted,omitempty"`
}
