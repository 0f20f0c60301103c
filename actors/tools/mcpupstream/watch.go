package mcpupstream

// Watch calls changed after the source's tool list changed: the upstream
// announced a new list (notifications/tools/list_changed; a watched source
// refetches it at once rather than at its next use), or the source
// connected in the background after failing at start. changed runs on the
// source's own goroutine, one call at a time per change; it reads the new
// list with MCPTools. stop ends the subscription.
func (s *Source) Watch(changed func()) (stop func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watchers == nil {
		s.watchers = map[int]func(){}
	}
	id := s.nextWatch
	s.nextWatch++
	s.watchers[id] = changed
	return func() {
		s.watchMu.Lock()
		defer s.watchMu.Unlock()
		delete(s.watchers, id)
	}
}

// watched reports whether anyone watches the tool list.
func (s *Source) watched() bool {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	return len(s.watchers) > 0
}

// refetchForWatchers refetches the announced tool list and tells the
// watchers (a failed refetch keeps the old list: they are told nothing).
func (s *Source) refetchForWatchers() {
	if s.closed.Load() {
		return
	}
	old := s.snap.Load()
	if s.refresh(s.life, old, false) == old {
		return
	}
	s.notifyWatchers()
}

// notifyWatchers calls every watcher.
func (s *Source) notifyWatchers() {
	s.watchMu.Lock()
	calls := make([]func(), 0, len(s.watchers))
	for _, w := range s.watchers {
		calls = append(calls, w)
	}
	s.watchMu.Unlock()
	for _, w := range calls {
		w()
	}
}
