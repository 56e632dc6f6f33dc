package engine

// SeesPrompt reports whether the named prompt is offered to caller: its
// roles, when it names any, and its audience predicate, evaluated as a
// tool's are. A prompt that names neither is offered to every caller. An
// unknown prompt is offered to no one.
func (e *Engine) SeesPrompt(caller *Caller, name string) bool {
	p, ok := e.cfg.Prompts[name]
	if !ok {
		return false
	}
	return e.among(caller, p.Roles, "prompt "+name, p.AudienceProgram())
}
