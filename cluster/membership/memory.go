package membership

import (
	"context"
	"sync"
)

// Network is an in-process membership service for tests: every provider made
// by [Network.Provider] sees the same member list, and tests can change what
// each member sees ([Network.SetView]) or declare a member suspect
// ([Network.Suspect]) to produce split views and ownership races on demand.
type Network struct {
	mu      sync.Mutex
	members map[string]Member
	subs    map[string]*memoryProvider
	// pinned holds per-member overrides installed by SetView.
	pinned map[string]View
}

// NewNetwork returns an empty in-process membership network.
func NewNetwork() *Network {
	return &Network{members: map[string]Member{}, subs: map[string]*memoryProvider{}, pinned: map[string]View{}}
}

// Provider returns a new member-side provider attached to the network.
func (n *Network) Provider() Provider { return &memoryProvider{net: n} }

// SetView overrides the view delivered to member id until [Network.Unpin]:
// it simulates a member whose view lags or diverges.
func (n *Network) SetView(id string, v View) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pinned[id] = v
	if p, ok := n.subs[id]; ok {
		p.deliver(Event{View: v})
	}
}

// Unpin removes the override for member id and delivers the shared view.
func (n *Network) Unpin(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.pinned, id)
	if p, ok := n.subs[id]; ok {
		p.deliver(Event{View: n.viewLocked()})
	}
}

// Suspect tells member id that its liveness lease lapsed.
func (n *Network) Suspect(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.subs[id]; ok {
		p.deliver(Event{Suspect: true})
	}
}

// View returns the shared view.
func (n *Network) View() View {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.viewLocked()
}

func (n *Network) viewLocked() View {
	ms := make([]Member, 0, len(n.members))
	for _, m := range n.members {
		ms = append(ms, m)
	}
	return NewView(ms...)
}

func (n *Network) broadcastLocked() {
	v := n.viewLocked()
	for id, p := range n.subs {
		if pv, ok := n.pinned[id]; ok {
			p.deliver(Event{View: pv})
			continue
		}
		p.deliver(Event{View: v})
	}
}

type memoryProvider struct {
	net    *Network
	id     string
	notify func(Event)
}

// deliver is called with net.mu held, which also serialises notifications.
func (p *memoryProvider) deliver(e Event) { p.notify(e) }

func (p *memoryProvider) Start(_ context.Context, self Member, notify func(Event)) error {
	n := p.net
	n.mu.Lock()
	defer n.mu.Unlock()
	p.id, p.notify = self.ID, notify
	n.members[self.ID] = self
	n.subs[self.ID] = p
	n.broadcastLocked()
	return nil
}

func (p *memoryProvider) Stop(context.Context) error {
	n := p.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs[p.id] != p {
		return nil
	}
	delete(n.members, p.id)
	delete(n.subs, p.id)
	n.broadcastLocked()
	return nil
}
