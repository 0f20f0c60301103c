package handle

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/mcpgrain/mcpgrain/actors/app"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// scope is a handle as a handler sees it (app.Scope): a client of the
// handle's grain, on the node the request reached. It keeps the states as
// last read (opened, or answered by a save) with their revisions.
type scope struct {
	h  *Host
	id string
	p  *pb.Principal

	mu     sync.Mutex
	states map[string]app.Saved
}

var (
	_ app.Scope            = (*scope)(nil)
	_ app.ConditionalSaver = (*scope)(nil)
)

func newScope(h *Host, id string, p *pb.Principal, states map[string]*pb.HandleState) *scope {
	s := &scope{h: h, id: id, p: p, states: make(map[string]app.Saved, len(states))}
	for name, v := range states {
		s.states[name] = saved(v)
	}
	return s
}

func saved(v *pb.HandleState) app.Saved {
	return app.Saved{Version: int(v.GetVersion()), Value: v.GetValue(), Revision: v.GetRevision()}
}

// Kind implements app.Scope.
func (s *scope) Kind() string { return app.KindHandle }

// ID implements app.Scope: the handle.
func (s *scope) ID() string { return s.id }

// Principal implements app.Scope.
func (s *scope) Principal() *pb.Principal { return s.p }

// State implements app.Scope: the value as last read, with its revision.
func (s *scope) State(name string) (app.Saved, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.states[name]
	return v, ok
}

// SaveState implements app.Scope: a save over the revision last read; a
// conflict (another save came first) is an error wrapping app.ErrRetry.
// The SDK saves with SaveStateIf.
func (s *scope) SaveState(ctx context.Context, name string, v app.Saved) error {
	cur, _ := s.State(name)
	ok, err := s.SaveStateIf(ctx, name, v, cur.Revision)
	if err == nil && !ok {
		err = fmt.Errorf("mcpgrain: handle state %q was saved meanwhile: %w", name, app.ErrRetry)
	}
	return err
}

// SaveStateIf implements app.ConditionalSaver: a request to the handle's
// owner.
func (s *scope) SaveStateIf(ctx context.Context, name string, v app.Saved, rev uint64) (bool, error) {
	if v.Version < math.MinInt32 || v.Version > math.MaxInt32 {
		return false, fmt.Errorf("mcpgrain: state %q: version %d out of range", name, v.Version)
	}
	r, err := s.h.request(ctx, s.id, &pb.HandleSave{
		Principal: s.p, Name: name, IfRevision: rev,
		State: &pb.HandleState{Version: int32(v.Version), Value: v.Value},
	})
	if err != nil {
		return false, fmt.Errorf("mcpgrain: handle: save state %q: %w", name, err)
	}
	s.mu.Lock()
	if cur := r.GetCurrent(); cur.GetRevision() == 0 {
		delete(s.states, name)
	} else {
		s.states[name] = saved(cur)
	}
	s.mu.Unlock()
	return r.GetSaved(), nil
}
