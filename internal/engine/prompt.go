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
	if len(p.Roles) > 0 && (!caller.Authenticated() || !caller.HasRole(p.Roles...)) {
		return false
	}
	return e.audience(caller, "prompt "+name, p.AudienceProgram())
}

// CanRead reports whether caller may read the named object: the gate of
// its get and list tools. An unknown object is readable by no one.
func (e *Engine) CanRead(caller *Caller, object string) bool {
	o, ok := e.cfg.Objects[object]
	return ok && e.canRead(caller, o)
}
