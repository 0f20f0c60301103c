// Package probe is a tiny built-in grain kind for smoke-testing a cluster:
// a durable counter whose every write is fenced by its activation's epoch.
// Each reply says which node and epoch served it, so a probe answers "is the
// grain on its rendezvous owner?", "did state survive a node kill?" and "did
// a stale activation get fenced?" from the outside. Integration tests and
// `mcpgrain bench` use it; operators can enable it with --enable-probe.
package probe

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// KindName is the probe grain kind's name.
const KindName = "probe"

// Options configure the probe kind.
type Options struct {
	// IdleTimeout passivates an idle probe. Zero keeps it resident.
	IdleTimeout time.Duration
	// Observer, if set, is called on every activation and deactivation
	// (tests use it to check that activations of one identity never
	// overlap). It runs inside the grain; it must be fast and thread-safe.
	Observer func(Event)
}

// Event is an activation lifecycle event reported to Options.Observer.
type Event struct {
	Identity string
	Node     string
	Epoch    uint64
	// Activated is true for an activation, false for a deactivation.
	Activated bool
	// Reason is the deactivation reason.
	Reason grain.Reason
}

// Kind returns the probe grain kind.
func Kind(o Options) grain.Kind {
	return grain.Kind{
		Name:        KindName,
		IdleTimeout: o.IdleTimeout,
		New:         func(string) grain.Grain { return &probe{observer: o.Observer} },
	}
}

type probe struct {
	observer func(Event)
	count    int64
	served   int64
}

func (p *probe) Activate(_ context.Context, g grain.Context, record []byte) error {
	if record != nil {
		var rec pb.ProbeRecord
		if err := proto.Unmarshal(record, &rec); err != nil {
			return fmt.Errorf("probe: decode record: %w", err)
		}
		p.count = rec.GetCount()
	}
	p.observe(g, true, "")
	return nil
}

func (p *probe) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	add, ok := msg.(*pb.ProbeAdd)
	if !ok {
		return nil, grain.Reject("probe: unsupported request %T", msg)
	}
	if d := add.GetDelta(); d != 0 {
		rec, err := proto.Marshal(&pb.ProbeRecord{Count: p.count + d})
		if err != nil {
			return nil, fmt.Errorf("probe: encode record: %w", err)
		}
		if err := g.Save(ctx, rec); err != nil {
			return nil, fmt.Errorf("probe: save: %w", err)
		}
		p.count += d
	}
	p.served++
	return &pb.ProbeState{Node: g.Node(), Epoch: g.Epoch(), Count: p.count, Served: p.served}, nil
}

func (p *probe) Deactivate(_ context.Context, g grain.Context, reason grain.Reason) {
	p.observe(g, false, reason)
}

func (p *probe) observe(g grain.Context, activated bool, reason grain.Reason) {
	if p.observer != nil {
		p.observer(Event{Identity: g.Identity(), Node: g.Node(), Epoch: g.Epoch(), Activated: activated, Reason: reason})
	}
}
