package app

import (
	"errors"
	"os"
	"strings"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// SecretProblems are what serve would refuse as it opens that the
// config's own rules cannot see: a webhook's signing secret and the audit
// checkpoint key, read from the environment and the key file as serve
// reads them. `config check` lists them with the config's problems, so a
// config it passes is one serve opens. No problem quotes a secret.
func SecretProblems(cfg *ontology.Config) ontology.Problems {
	var problems ontology.Problems
	if _, err := webhooks.Endpoints(cfg.Webhooks, os.Getenv); err != nil {
		problems = append(problems, problemOf("webhooks", err))
	}
	if cp := cfg.Audit.Checkpoint; cp != nil {
		if _, err := checkpoint.LoadSigner(cp.KeyFile, cp.KeyEnv, os.Getenv); err != nil {
			problems = append(problems, problemOf("audit.checkpoint", err))
		}
	}
	return problems
}

// problemOf is a refusal as a config problem: at the field path its
// message begins with, when it names one under at, else at at.
func problemOf(at string, err error) ontology.Problem {
	msg := err.Error()
	var coded *errcode.Error
	if errors.As(err, &coded) {
		msg = coded.Msg
	}
	if path, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(path, at) && !strings.Contains(path, " ") {
		return ontology.Problem{Path: path, Message: rest}
	}
	return ontology.Problem{Path: at, Message: msg}
}
