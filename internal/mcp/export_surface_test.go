package mcp

import "github.com/google/uuid"

// Watching counts the sessions subscribed to an approval: under protocol
// 2026-07-28 a subscription is taken after the client's Subscribe
// returns, so a test waits for it.
func Watching(s *Server, id string) int {
	parsed, err := uuid.Parse(id)
	if err != nil {
		return 0
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	if wa := s.watch.approvals[parsed]; wa != nil {
		return len(wa.sessions)
	}
	return 0
}
