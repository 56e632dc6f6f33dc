package mcp

// SetBeforeTool installs a hook that runs as each tool handler starts: a
// test's way to make a handler panic.
func SetBeforeTool(s *Server, f func(tool string)) { s.beforeTool = f }

// ActionSchema is an action's input schema as its tool shows it.
var ActionSchema = actionSchema

// ForCaller is the server an HTTP request of caller is answered by.
var ForCaller = (*Server).forCaller

// MaxRememberedCallers bounds RememberedCallers.
const MaxRememberedCallers = maxRememberedCallers

// RememberedCallers is how many callers' servers s remembers.
func RememberedCallers(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byCaller)
}
