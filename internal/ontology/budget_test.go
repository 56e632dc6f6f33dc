package ontology

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestBudgetsByRisk: an action's budget defaults from its risk class —
// destructive unless declared destructive: false (as its tool's hint),
// read only for an http call of a safe method — and an override replaces
// the fields it sets.
func TestBudgetsByRisk(t *testing.T) {
	t.Parallel()
	load := func(src string) *Action {
		t.Helper()
		cfg, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Actions["create_label"]
	}
	get := strings.Replace(strings.Replace(httpBase, "method: POST", "method: GET", 1), "        body: {order: \":order_id\", weight: \":weight\", kind: return}\n", "", 1)
	notDestructive := func(src string) string {
		return strings.Replace(src, "    policy: {approval: required}\n", "    policy: {approval: required}\n    destructive: false\n", 1)
	}
	for _, tc := range []struct {
		name string
		src  string
		risk Risk
		want Budget
	}{
		{"undeclared", httpBase, RiskDestructive, Budget{PerMinute: 2, MaxConcurrent: 1, PerDay: 20}},
		{"undeclared GET", get, RiskDestructive, Budget{PerMinute: 2, MaxConcurrent: 1, PerDay: 20}},
		{"declared destructive", strings.Replace(httpBase, "    policy: {approval: required}\n", "    policy: {approval: required}\n    destructive: true\n", 1),
			RiskDestructive, Budget{PerMinute: 2, MaxConcurrent: 1, PerDay: 20}},
		{"a POST, not destructive", notDestructive(httpBase), RiskWrite, Budget{PerMinute: 20, MaxConcurrent: 2, PerDay: 1000}},
		{"a GET, not destructive", notDestructive(get), RiskRead, Budget{PerMinute: 60, MaxConcurrent: 4, PerDay: 5000}},
		{"overridden in part", strings.Replace(notDestructive(get), "    destructive: false\n", "    destructive: false\n    budget: {per_minute: 10, per_day: 100}\n", 1),
			RiskRead, Budget{PerMinute: 10, MaxConcurrent: 4, PerDay: 100}},
		// A field left to the class follows the one beneath it down.
		{"a day lowered", strings.Replace(httpBase, "    policy: {approval: required}\n", "    policy: {approval: required}\n    budget: {per_day: 1}\n", 1),
			RiskDestructive, Budget{PerMinute: 1, MaxConcurrent: 1, PerDay: 1}},
		{"a minute lowered", strings.Replace(notDestructive(get), "    destructive: false\n", "    destructive: false\n    budget: {per_minute: 3}\n", 1),
			RiskRead, Budget{PerMinute: 3, MaxConcurrent: 3, PerDay: 5000}},
		{"a day lowered below a minute", strings.Replace(notDestructive(get), "    destructive: false\n", "    destructive: false\n    budget: {per_day: 2}\n", 1),
			RiskRead, Budget{PerMinute: 2, MaxConcurrent: 2, PerDay: 2}},
	} {
		a := load(tc.src)
		if a.Risk() != tc.risk || a.EffectiveBudget() != tc.want {
			t.Errorf("%s: risk %s budget %+v, want %s %+v", tc.name, a.Risk(), a.EffectiveBudget(), tc.risk, tc.want)
		}
	}
}

// TestBrokenBudgets: a budget that cannot load is refused at its field
// path.
func TestBrokenBudgets(t *testing.T) {
	t.Parallel()
	at := "actions.create_label.budget"
	for _, tc := range []struct {
		budget string
		paths  []string
		write  bool // the action not destructive: a write, two at once
	}{
		{"{per_minute: 0}", []string{at + ".per_minute"}, false},
		{"{per_day: -1}", []string{at + ".per_day"}, false},
		{"{max_concurrent: two}", []string{at + ".max_concurrent"}, false},
		{"{per_hour: 5}", []string{at + ".per_hour"}, false},
		{"{}", []string{at}, false},
		{"{per_minute: 30}", []string{at + ".per_minute"}, false}, // a destructive day allows 20
		{"{per_minute: 50, per_day: 40}", []string{at + ".per_minute"}, false},
		{"{max_concurrent: 3}", []string{at + ".max_concurrent"}, false}, // a destructive minute allows 2
		// The smaller of a pair lowered below the class's larger: the
		// larger follows it down (EffectiveBudget), unless written.
		{"{per_day: 1}", nil, false},
		{"{per_minute: 1}", nil, true},
		{"{per_minute: 1, max_concurrent: 2}", []string{at + ".max_concurrent"}, true},
		{"{per_day: 1, per_minute: 2}", []string{at + ".per_minute"}, false},
	} {
		declared := "    budget: " + tc.budget + "\n"
		if tc.write {
			declared += "    destructive: false\n"
		}
		src := strings.Replace(httpBase, "    policy: {approval: required}\n", "    policy: {approval: required}\n"+declared, 1)
		_, err := Parse([]byte(src))
		ps, ok := errors.AsType[Problems](err)
		var paths []string
		for _, p := range ps {
			paths = append(paths, p.Path)
		}
		if ok != (tc.paths != nil) || !slices.Equal(paths, tc.paths) {
			t.Errorf("budget %s: problems %v, want at %v", tc.budget, err, tc.paths)
		}
	}
}
