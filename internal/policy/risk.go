package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// The words an operation's name is classified by. A destructive word
// anywhere in the name outranks the method: Slack's auth_revoke is a GET,
// chat_delete a POST. A read is inferred from a name only when it begins
// or ends on a read word and holds no word that writes.
var (
	destructiveWords = set("delete", "remove", "revoke", "uninstall", "destroy", "purge", "erase", "wipe",
		"drop", "terminate", "kick", "ban", "invalidate", "unlink", "detach", "cancel", "void", "deprovision",
		"deregister", "unregister", "unsubscribe", "expunge", "truncate")
	writeWords = set("create", "add", "update", "set", "put", "post", "send", "make", "insert", "upload",
		"import", "patch", "modify", "edit", "change", "replace", "write", "save", "submit", "approve", "reject",
		"execute", "run", "start", "stop", "trigger", "invite", "join", "leave", "archive", "unarchive",
		"rename", "move", "copy", "transfer", "pay", "capture", "captured", "refund", "authorized", "returned",
		"register", "logout", "reset", "enable", "disable", "mark", "pin", "unpin", "star", "unstar", "open",
		"close", "publish", "unpublish", "release", "assign", "unassign", "grant", "extend", "renew",
		"rotate", "generate", "regenerate", "reveal", "schedule", "restore",
		"activate", "deactivate", "lock", "unlock", "mute", "unmute", "react", "accept", "decline",
		"commit", "apply", "provision", "subscribe", "follow", "unfollow", "bulk", "batch", "upsert", "merge",
		"exchange", "confirm", "complete", "finish")
	readWords = set("get", "list", "retrieve", "search", "find", "lookup", "query", "read", "fetch",
		"describe", "show", "info", "history", "count", "check", "verify", "validate", "is", "has", "exists",
		"view", "ping", "health", "status", "version", "download", "export", "preview", "estimate", "calculate",
		"compute", "quote", "resolve", "test")
	// readOverSafeOnly are read words that change state as often as not
	// (resolveIncident, verifyAccount): over a safe method they read, as
	// the method says (Discord's GET invite_resolve), but they make no
	// POST or SOAP operation a read — a write is the side to err on.
	readOverSafeOnly = set("resolve", "verify", "export", "download")
	// stateChanging are word pairs that change state though their first
	// word reads: CheckIn, CheckOut.
	stateChanging = map[[2]string]bool{{"check", "in"}: true, {"check", "out"}: true}
)

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// isRead reports whether w is a read word: one of readWords, or a noun of
// information (tokeninfo, userinfo) that does not begin on a word that
// writes or removes (updateuserinfo, deleteuserinfo: one word, as a legacy
// RPC path spells it, that changes state).
func isRead(w string) bool {
	if readWords[w] {
		return true
	}
	stem, ok := strings.CutSuffix(w, "info")
	if !ok || stem == "" {
		return false
	}
	for _, vocabulary := range []map[string]bool{writeWords, destructiveWords} {
		for v := range vocabulary {
			if strings.HasPrefix(stem, v) {
				return false
			}
		}
	}
	return true
}

// opName is the name an operation is classified by: its id, or its path
// when it has none.
func opName(op *apidoc.Operation) (string, string) {
	if op.ID != "" {
		return op.ID, "its id " + fmt.Sprintf("%q", op.ID)
	}
	return op.Path, "its path " + fmt.Sprintf("%q", op.Path)
}

// classification is an operation's risk class and what could not be
// shown of it.
type classification struct {
	risk Derived[ontology.Risk]
	// methodContradicted is set when the name says the operation changes
	// state over a method RFC 9110 defines as safe: the method's
	// idempotency cannot be trusted either.
	methodContradicted bool
	// inferredRead is set when the read is the name's word only.
	inferredRead bool
	unresolved   []Unresolved
}

// classify decides an operation's risk class (spec 001: the class the
// approval, rate, environments and hints all follow).
func classify(op *apidoc.Operation) classification {
	name, called := opName(op)
	ws := words(name)
	// A read word in a verb's place — the name's first word (getPet) or
	// its last (Slack's conversations_list) — names what the call does;
	// words elsewhere may be nouns (get_guild_ban reads a ban,
	// admin_inviteRequests_list lists invitations).
	// A dotted id (Google's oauth2.userinfo.get, oauth2.getCertFor…)
	// puts its verb at an end of its last segment.
	readName := ""
	for _, ends := range [][]string{ws, words(name[strings.LastIndexByte(name, '.')+1:])} {
		if len(ends) == 0 || readName != "" {
			continue
		}
		if isRead(ends[0]) {
			readName = ends[0]
		} else if isRead(ends[len(ends)-1]) {
			readName = ends[len(ends)-1]
		}
	}
	var destructive, writes string
	for i, w := range ws {
		if destructive == "" && destructiveWords[w] {
			destructive = w
		}
		if writes == "" && writeWords[w] {
			writes = w
		}
		if writes == "" && i+1 < len(ws) && stateChanging[[2]string{w, ws[i+1]}] {
			writes = w + " " + ws[i+1]
		}
	}
	if ontology.SafeMethod(op.Method) && readName != "" {
		// A safe method named as a read is a read, whatever nouns follow.
		destructive, writes = "", ""
	}
	if destructive != "" || writes != "" {
		// Over a method that is not safe, a read is inferred from the name
		// only when nothing in it writes.
		readName = ""
	}
	src := op.Source
	c := classification{}
	switch m := op.Method; {
	case m == "DELETE":
		c.risk = derive(ontology.RiskDestructive, "DELETE removes the resource it names (RFC 9110 §9.3.5): destructive", src)
	case destructive != "":
		how := "the method"
		if m == "" {
			how = "WSDL, which declares no effect"
		}
		c.risk = derive(ontology.RiskDestructive, fmt.Sprintf("%s holds %q, which removes or revokes something: destructive, whatever %s says", called, destructive, how), src)
		if ontology.SafeMethod(m) {
			c.methodContradicted = true
			c.unresolved = append(c.unresolved, Unresolved{Kind: UnresolvedStateChangingRead, Field: "risk", Source: []string{src},
				Detail: fmt.Sprintf("%s is safe by RFC 9110 §9.2.1, but %s holds %q: the service changes state on a %s", m, called, destructive, m)})
		}
	case ontology.SafeMethod(m) && writes != "":
		c.risk = derive(ontology.RiskWrite, fmt.Sprintf("%s holds %q, which changes state: a write, although %s is safe by RFC 9110 §9.2.1", called, writes, m), src)
		c.methodContradicted = true
		c.unresolved = append(c.unresolved, Unresolved{Kind: UnresolvedStateChangingRead, Field: "risk", Source: []string{src},
			Detail: fmt.Sprintf("%s is safe by RFC 9110 §9.2.1, but %s holds %q: the service changes state on a %s", m, called, writes, m)})
	case ontology.SafeMethod(m):
		c.risk = derive(ontology.RiskRead, fmt.Sprintf("%s is safe by RFC 9110 §9.2.1 and %s says nothing of a change: a read", m, called), src)
	case readName != "" && op.ID == "" && m == "POST":
		// A path names a resource, not what the call does to it: POST
		// /orders/{orderId}/status sets the status it names.
		c.risk = derive(ontology.RiskWrite, fmt.Sprintf("%s holds %q, but a path names a resource, not what a POST does to it (POST /orders/{id}/status sets the status): a read is inferred from an operationId only, so it is taken to write", called, readName), src)
	case readName != "" && !readOverSafeOnly[readName] && (m == "POST" || m == ""):
		// Only a POST, whose semantics are the resource's own (RFC 9110
		// §9.3.3), or a SOAP operation, is read by its name: a PUT or a
		// PATCH replaces or modifies state by definition, whatever it is
		// called.
		over := m
		if m == "" {
			over = "a SOAP operation, whose effect WSDL does not declare"
		}
		c.risk = derive(ontology.RiskRead, fmt.Sprintf("%s begins or ends on %q, a read, and holds no word that writes: a read over %s", called, readName, over), src)
		c.inferredRead = true
		c.unresolved = append(c.unresolved, Unresolved{Kind: UnresolvedInferredRead, Field: "risk", Source: []string{src},
			Detail: fmt.Sprintf("the read is inferred from the word %q only; %s does not show that the call changes nothing", readName, over)})
	case readName != "" && (m == "POST" || m == ""):
		c.risk = derive(ontology.RiskWrite, fmt.Sprintf("%s begins or ends on %q, which reads only over a safe method: it changes state as often as not (verifyAccount, resolveIncident), so it is taken to write", called, readName), src)
	case m == "":
		c.risk = derive(ontology.RiskWrite, fmt.Sprintf("WSDL declares no effect, and %s is not named as a read: taken to write", called), src)
	default:
		c.risk = derive(ontology.RiskWrite, fmt.Sprintf("%s is not safe by RFC 9110 §9.2.1, and %s names no removal: a write", m, called), src)
	}
	return c
}

// retryPolicy is how a failed attempt of a call is repeated, with the
// idempotency key it carries, if any.
type retryPolicy struct {
	retry       Derived[ontology.HTTPRetry]
	keyRequired Derived[bool]
	keyHeader   Derived[string]
	unresolved  []Unresolved
}

// decideRetry derives retry from the idempotency the description shows
// (spec 001, "Retrying, and when not to"): RFC 9110's idempotent methods
// and a declared idempotency-key header. A read inferred from a name is
// not shown to be idempotent: it is attempted once.
func decideRetry(op *apidoc.Operation, c classification) retryPolicy {
	src := op.Source
	none := func(rule string) (Derived[bool], Derived[string]) {
		return derive(false, rule, src), derive("", rule, src)
	}
	var p retryPolicy
	switch m := op.Method; {
	case m == "":
		p.retry = derive(ontology.RetryNever, "WSDL 1.1 declares nothing of idempotency, and a key would be a header no SOAP service was built to honour: one attempt", src)
		p.keyRequired, p.keyHeader = none("SOAP carries no idempotency key")
		p.unresolved = append(p.unresolved, Unresolved{Kind: UnresolvedIdempotency, Field: "retry", Source: []string{src},
			Detail: "whether repeating the SOAP call is harmless cannot be determined from WSDL: it is attempted once"})
	case ontology.IdempotentMethod(m) && !c.methodContradicted:
		p.retry = derive(ontology.RetrySafe, fmt.Sprintf("%s is idempotent by RFC 9110 §9.2.2: up to three attempts on 429, 502, 503, 504 or no answer", m), src)
		p.keyRequired, p.keyHeader = none(m + " is idempotent: no key is needed")
	case ontology.IdempotentMethod(m):
		p.retry = derive(ontology.RetryNever, fmt.Sprintf("%s is idempotent by RFC 9110 §9.2.2, but the name says this one changes state, so the method's promise cannot be trusted: one attempt", m), src)
		p.keyRequired, p.keyHeader = none("no idempotency-key header is declared")
		p.unresolved = append(p.unresolved, Unresolved{Kind: UnresolvedIdempotency, Field: "retry", Source: []string{src},
			Detail: fmt.Sprintf("a %s that changes state may not be idempotent: it is attempted once", m)})
	default:
		if h := idempotencyHeader(op); h != nil {
			p.retry = derive(ontology.RetryWithIdempotencyKey, fmt.Sprintf("%s is not idempotent by RFC 9110 §9.2.2, and the operation declares the %s header: retried with one key per invocation, the same on every attempt", m, h.Name), h.Source)
			p.keyRequired = derive(true, fmt.Sprintf("every invocation sends a key in %s, so that its retries are told from a new call", h.Name), h.Source)
			p.keyHeader = derive(h.Name, "the header parameter the operation declares for it", h.Source)
			break
		}
		p.retry = derive(ontology.RetryNever, fmt.Sprintf("%s is not idempotent by RFC 9110 §9.2.2 and the operation declares no idempotency-key header: one attempt", m), src)
		p.keyRequired, p.keyHeader = none("no idempotency-key header is declared")
		detail := fmt.Sprintf("a %s is not idempotent and declares no idempotency-key header: a lost answer cannot be retried safely, so it is attempted once", m)
		if c.inferredRead {
			detail = fmt.Sprintf("the read over %s is inferred from the name only, so repeating it is not shown to be harmless: it is attempted once", m)
		}
		p.unresolved = append(p.unresolved, Unresolved{Kind: UnresolvedIdempotency, Field: "retry", Source: []string{src}, Detail: detail})
	}
	return p
}

// idempotencyHeader returns the header parameter an operation takes an
// idempotency key in (Idempotency-Key, X-Idempotency-Key …), or nil.
func idempotencyHeader(op *apidoc.Operation) *apidoc.Parameter {
	for _, p := range op.Parameters {
		if p.In != apidoc.InHeader {
			continue
		}
		if ws := words(p.Name); slices.Contains(ws, "idempotency") || slices.Contains(ws, "idempotent") {
			return p
		}
	}
	return nil
}
