package mcp

// SetBeforeTool installs a hook that runs as each tool handler starts: a
// test's way to make a handler panic.
func SetBeforeTool(s *Server, f func(tool string)) { s.beforeTool = f }

// ActionSchema is an action's input schema as its tool shows it.
var ActionSchema = actionSchema
