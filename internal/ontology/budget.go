package ontology

// ---- Call budgets (issue 14, item 5) ----
//
// Every action's executions are counted against three limits — calls per
// minute, calls running at once, calls per day — that default from its
// risk class and may be overridden per action (actions.NAME.budget). The
// engine counts them in Postgres, per tenant and action, so that every
// replica spends the same budget.

import "fmt"

// Risk is how much an action's call can change, from a closed set: it
// chooses the action's default budget.
type Risk string

// The risk classes.
const (
	// RiskRead: the action is declared destructive: false and its effect
	// cannot write (an http call of a safe method: GET, HEAD, OPTIONS).
	RiskRead Risk = "read"
	// RiskWrite: declared destructive: false, and the effect may write.
	RiskWrite Risk = "write"
	// RiskDestructive: declared destructive: true, or not declared at all.
	RiskDestructive Risk = "destructive"
)

// Risks returns every risk class, least first.
func Risks() []Risk { return []Risk{RiskRead, RiskWrite, RiskDestructive} }

// Budget is how many of an action's calls may execute: per minute, at
// once, and per day. A field left zero in a config's override takes the
// risk class's default.
type Budget struct {
	PerMinute     int `yaml:"per_minute"`
	MaxConcurrent int `yaml:"max_concurrent"`
	PerDay        int `yaml:"per_day"`
}

// RiskBudget is a risk class's default budget. read and destructive are
// spec 001's table; write sits between them: a write can be undone, so it
// may run at a third of a read's rate, but two at once at most, since
// writes contend for the rows or the API they change.
func RiskBudget(r Risk) Budget {
	switch r {
	case RiskRead:
		return Budget{PerMinute: 60, MaxConcurrent: 4, PerDay: 5000}
	case RiskWrite:
		return Budget{PerMinute: 20, MaxConcurrent: 2, PerDay: 1000}
	}
	return Budget{PerMinute: 2, MaxConcurrent: 1, PerDay: 20}
}

// Risk is the action's risk class. Destructive follows DestructiveHint,
// not DeclaredDestructive: an action nobody described is the one a budget
// most needs to hold back, and clients are told to assume it destructive
// (its tool's destructiveHint), so the budget and the hint cannot
// disagree. destructive: false lifts both at once. Whether the effect
// writes is read from its declaration: an http call of a safe method
// cannot; a SQL statement, and every other kind, is counted as writing
// (orangerail does not parse a statement to prove it reads; objects are
// how agents read).
func (a *Action) Risk() Risk {
	switch {
	case a.DestructiveHint():
		return RiskDestructive
	case a.Execute.Kind() == ExecuteHTTP && SafeMethod(a.Execute.HTTP.Method):
		return RiskRead
	}
	return RiskWrite
}

// EffectiveBudget is the budget the action's executions are counted
// against: its risk class's, with each field its budget sets in its place.
// A field left to the class never stands above the one beneath it that the
// budget lowered: `per_day: 1` allows one call a minute, not the class's
// two, and `per_minute: 1` one at once — a limit that could never be
// reached would only mislead whoever reads a refusal's allowed. A field
// written above the one beneath it is refused at load (validateBudget).
func (a *Action) EffectiveBudget() Budget {
	b := RiskBudget(a.Risk())
	o := a.Budget
	if o == nil {
		return b
	}
	if o.PerMinute > 0 {
		b.PerMinute = o.PerMinute
	}
	if o.MaxConcurrent > 0 {
		b.MaxConcurrent = o.MaxConcurrent
	}
	if o.PerDay > 0 {
		b.PerDay = o.PerDay
	}
	if o.PerMinute == 0 {
		b.PerMinute = min(b.PerMinute, b.PerDay)
	}
	if o.MaxConcurrent == 0 {
		b.MaxConcurrent = min(b.MaxConcurrent, b.PerMinute)
	}
	return b
}

// validateBudget checks an action's budget beyond the schema (which holds
// each field to a whole number of at least 1): limits that contradict each
// other are a mistake, reported where they are written.
func validateBudget(a *Action, path string, add func(path, format string, args ...any)) {
	o := a.Budget
	if o == nil {
		return
	}
	b := a.EffectiveBudget()
	if o.PerMinute > 0 && b.PerMinute > b.PerDay {
		add(path+".budget.per_minute", "%d calls a minute can never be reached under per_day: %d; lower it, or raise per_day", b.PerMinute, b.PerDay)
	}
	if o.MaxConcurrent > 0 && b.MaxConcurrent > b.PerMinute {
		add(path+".budget.max_concurrent", "%d calls at once can never be reached under per_minute: %d; lower it, or raise per_minute", b.MaxConcurrent, b.PerMinute)
	}
}

// String is the budget as config check and describe_action say it.
func (b Budget) String() string {
	return fmt.Sprintf("%d a minute, %d at once, %d a day", b.PerMinute, b.MaxConcurrent, b.PerDay)
}

// ---- end of call budgets ----
