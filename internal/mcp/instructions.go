package mcp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/ontology"
)

// MaxInstructionsChars bounds initialize.instructions: a host puts them in
// its model's context on every turn, so they say how the service works
// and leave the catalog itself to tools/list and orangerail://ontology.
const MaxInstructionsChars = 2048

// listBudget bounds each list of names in the instructions; the names past
// it are counted, and orangerail://ontology lists them all.
const listBudget = 360

// instructions tells a caller's model, in a few sentences, what the
// service governs and how approvals work, from the caller's catalog only
// (names, the tools it sees): a tool it cannot see is never named.
// session says whether resources/subscribe works on this server.
func (s *Server) instructions(names []string, session bool) string {
	var objects, governed, direct []string
	sql, check := false, false
	for _, name := range names {
		t := s.tools[name]
		switch t.kind {
		case ontology.ToolGet:
			objects = append(objects, t.subject)
		case ontology.ToolAction:
			if s.cfg.Actions[t.subject].Policy.Approval == ontology.ApprovalRequired {
				governed = append(governed, name)
			} else {
				direct = append(direct, name)
			}
		case ontology.ToolSQLQuery:
			sql = true
		case ontology.ToolCheckApproval:
			check = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is governed by orangerail: every call you make is checked against its ontology, scoped to your tenant, and recorded in an append-only audit log.", s.cfg.Service)
	if s.cfg.Preset == ontology.PresetSandbox && len(governed)+len(direct) > 0 {
		b.WriteString(" This deployment is a sandbox: an action call answers dry_run; it is recorded, and nothing is staged or executed.")
	}
	if slices.Contains(names, ontology.ListResourcesTool) {
		// The meta surface: the tools named below may be grouped behind
		// manage_resource rather than offered by name.
		b.WriteString(" Tools are grouped into resources: list_resources lists them, describe_resource gives their full schemas, " +
			"and manage_resource calls one, through the same checks as a call by name.")
		var grouped []string
		for _, name := range names {
			if s.cfg.GroupOf(name) != "" {
				grouped = append(grouped, name)
			}
		}
		if len(grouped) > 0 {
			// Named below by their objects and actions, and not offered
			// by name: a call by name answers as for no such tool.
			fmt.Fprintf(&b, " Call these through manage_resource, never by name: %s.", listed(grouped))
		}
	}
	if len(objects) > 0 {
		fmt.Fprintf(&b, " You may read these objects, each with its NAME_get and NAME_list tools: %s.", listed(objects))
	}
	if sql {
		b.WriteString(" sql_query runs one read-only SELECT over your tenant's rows.")
	}
	if len(direct) > 0 {
		fmt.Fprintf(&b, " These actions run when called, without approval: %s.", listed(direct))
	}
	switch {
	case len(governed) > 0 && s.cfg.Preset == ontology.PresetSandbox:
		// A sandbox stages no approval: every action call answers dry_run.
		fmt.Fprintf(&b, " These actions would need a person's approval: %s.", listed(governed))
	case len(governed) > 0 && check:
		fmt.Fprintf(&b, " These actions need a person's approval: %s.", listed(governed))
		b.WriteString(" Approvals: a call of one of them does not run; it answers status approval_pending with an approvalId. " +
			"A person decides it at the approvals desk. Poll check_approval with that approvalId: it answers pending until then; " +
			"once approved, that poll executes the action, exactly once, and returns its result; a rejected or expired approval never runs.")
		b.WriteString(" Read orangerail://approvals/{approvalId} for an approval's status without executing anything")
		if session {
			b.WriteString("; subscribe to it to be told when the status changes")
		}
		b.WriteString(".")
	}
	if len(objects)+len(governed)+len(direct) > 0 {
		b.WriteString(" orangerail://ontology describes every object, link and action you may use, with its policy.")
	}
	return b.String()
}

// listed joins names, sorted, up to listBudget characters; the rest are
// counted.
func listed(names []string) string {
	names = slices.Sorted(slices.Values(names))
	var shown []string
	size := 0
	for i, name := range names {
		if size+len(name) > listBudget {
			return strings.Join(shown, ", ") + fmt.Sprintf(" and %d more", len(names)-i)
		}
		shown = append(shown, name)
		size += len(name) + 2
	}
	return strings.Join(shown, ", ")
}
