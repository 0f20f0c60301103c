package reminders

// PollSync runs one scan in the calling goroutine (tests drive scans and
// time explicitly instead of waiting for them).
func (s *Service) PollSync() {
	s.mu.Lock()
	if s.polling {
		s.mu.Unlock()
		return
	}
	s.polling = true
	s.mu.Unlock()
	s.poll()
}

// Armed returns how many reminders are armed in memory.
func (s *Service) Armed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scheduled)
}
