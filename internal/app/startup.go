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
	// The variables serve opens with: unset, it refuses to open.
	for _, v := range []struct {
		path, env string
		read      bool
	}{
		{"datasource.url_env", cfg.Datasource.URLEnv, true},
		{"sql_query.url_env", cfg.SQLQuery.URLEnv, cfg.SQLQuery.Enabled},
		{"desk.client_secret_env", deskSecretEnv(cfg), true},
	} {
		if p := unsetVariable(v.path, v.env); v.read && p != nil {
			problems = append(problems, *p)
		}
	}
	return problems
}

// unsetVariable is the problem of the setting at path, which names env, a
// variable serve opens with, when env is not set; nil when it is, or when
// the setting names none.
func unsetVariable(path, env string) *ontology.Problem {
	if env == "" || os.Getenv(env) != "" {
		return nil
	}
	return &ontology.Problem{Path: path, Message: "names " + env + ", which is not set"}
}

// deskSecretEnv is the variable holding the desk's client secret, or ""
// for none (no desk, or a public client).
func deskSecretEnv(cfg *ontology.Config) string {
	if cfg.Desk == nil {
		return ""
	}
	return cfg.Desk.ClientSecretEnv
}

// Warnings is what serve warns of as it opens, without refusing to open:
// the config's own (ontology.Config.Warnings), and, in the files it names,
// a checkpoint key_file its group or others may read. config check prints
// them beside its problems, which they are not.
func Warnings(cfg *ontology.Config) ontology.Problems {
	ws := cfg.Warnings()
	if cp := cfg.Audit.Checkpoint; cp != nil {
		if mode, exposed := keyFileExposed(cp.KeyFile); exposed {
			ws = append(ws, ontology.Problem{Path: "audit.checkpoint.key_file", Message: "mode " + mode.String() + " " + keyFileExposedAdvice})
		}
	}
	return ws
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
