package membership

import (
	"context"
	"sync"
)

// Single is the embedded one-node provider: the view always holds exactly
// this member. It needs no external service and is the default for
// `mcpgrain dev`.
type Single struct {
	mu      sync.Mutex
	stopped bool
}

// NewSingle returns a one-node provider.
func NewSingle() *Single { return &Single{} }

// Start implements [Provider]: it reports a view of only self.
func (s *Single) Start(_ context.Context, self Member, notify func(Event)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		notify(Event{View: NewView(self)})
	}
	return nil
}

// Stop implements [Provider].
func (s *Single) Stop(context.Context) error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	return nil
}
