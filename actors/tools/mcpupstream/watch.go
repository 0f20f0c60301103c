package mcpupstream

import "context"

// Watch calls changed after the source's tool list changed: a refetch
// (at a use, after the list got older than RefreshEvery or on a miss)
// found a different list, the upstream announced a new one
// (notifications/tools/list_changed; a watched source refetches it at
// once rather than at its next use), or the source connected in the
// background after failing at start. changed runs on the goroutine that
// found the change and may run concurrently with itself; it reads the new
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

// refetchForWatchers refetches the announced tool list, bounded by
// ConnectTimeout (refresh tells the watchers and the OnChange functions
// if it changed; a failed refetch keeps the old list).
func (s *Source) refetchForWatchers() {
	if s.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(s.life, s.opts.ConnectTimeout)
	defer cancel()
	s.refresh(ctx, s.snap.Load(), false)
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
