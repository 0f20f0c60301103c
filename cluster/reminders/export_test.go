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

// WaitIdle waits until no scan, overdue fire or delivery (with its
// completion) is running. With a fake clock nothing starts by itself, so
// after it returns a delivery that has not happened will not happen until
// the test moves the clock or scans: tests assert "nothing fired" with it
// instead of waiting a while.
func (s *Service) WaitIdle() { s.wg.Wait() }
