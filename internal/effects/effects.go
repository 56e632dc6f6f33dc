// Package effects is the list of orangerail's effect kinds: which
// implementation runs an action of each execute kind. The engine defines
// the seam (engine.Effect) and imports none of them; the composition root
// hands this list to engine.New. A new kind — an upstream HTTP call, a SOAP
// operation — is a package beside sqleffect and one line here.
package effects

import (
	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/effects/soapeffect"
	"github.com/orangerail/orangerail/internal/effects/sqleffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// Factories returns the effect factory of every kind of effect: what
// engine.Config.Effects takes. not_implemented has none: such an action
// never runs.
func Factories() map[ontology.ExecuteKind]engine.EffectFactory {
	return map[ontology.ExecuteKind]engine.EffectFactory{
		ontology.ExecuteSQL:  sqleffect.New,
		ontology.ExecuteHTTP: httpeffect.New,
		ontology.ExecuteSOAP: soapeffect.New,
	}
}

// TargetReader makes the reader of an action whose target an upstream
// answers (target: {upstream: …, get: …}): what engine.Config.TargetReaders
// takes. It sends through the same kind of caller an http execute does.
func TargetReader(name string, a *ontology.Action) (engine.TargetReader, error) {
	return httpeffect.NewTargetReader(name, a)
}
