// Package probe is a tiny built-in grain kind for smoke-testing a cluster:
// a durable counter whose every write is fenced by its activation's epoch.
// Each reply says which node and epoch served it, so a probe answers "is the
// grain on its rendezvous owner?", "did state survive a node kill?" and "did
// a stale activation get fenced?" from the outside. Integration tests and
// the chaos harness use it; operators can enable it with --enable-probe.
package probe

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// KindName is the probe grain kind's name.
const KindName = "probe"

// MaxReminders bounds the reminders one ProbeRemind may set: each is a
// durable row and timer.
const MaxReminders = 100

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
		New:         func(string) grain.Grain { return &probe{observer: o.Observer, rec: &pb.ProbeRecord{}, now: time.Now} },
	}
}

type probe struct {
	observer func(Event)
	rec      *pb.ProbeRecord
	served   int64
	now      func() time.Time
}

func (p *probe) Activate(_ context.Context, g grain.Context, record []byte) error {
	if record != nil {
		if err := proto.Unmarshal(record, p.rec); err != nil {
			return fmt.Errorf("probe: decode record: %w", err)
		}
	}
	p.observe(g, true, "")
	return nil
}

func (p *probe) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *pb.ProbeAdd:
		if d := m.GetDelta(); d != 0 {
			next := proto.Clone(p.rec).(*pb.ProbeRecord)
			next.Count += d
			if err := p.save(ctx, g, next); err != nil {
				return nil, err
			}
		}
		p.served++
		return &pb.ProbeState{Node: g.Node(), Epoch: g.Epoch(), Count: p.rec.GetCount(), Served: p.served}, nil
	case *pb.ProbeRemind:
		if len(m.GetReminders()) > MaxReminders {
			return nil, grain.Reject("probe: at most %d reminders per request (got %d)", MaxReminders, len(m.GetReminders()))
		}
		rs := make([]store.Reminder, 0, len(m.GetReminders()))
		for _, r := range m.GetReminders() {
			if r.GetName() == "" || r.GetPeriodMs() < 0 {
				return nil, grain.Reject("probe: reminder needs a name and a non-negative period")
			}
			rs = append(rs, store.Reminder{Name: r.GetName(), DueAt: time.UnixMilli(r.GetDueAtMs()), Period: time.Duration(r.GetPeriodMs()) * time.Millisecond})
		}
		if err := g.SetReminders(ctx, rs...); err != nil {
			return nil, fmt.Errorf("probe: set reminders: %w", err)
		}
		p.served++
		return &pb.ProbeState{Node: g.Node(), Epoch: g.Epoch(), Count: p.rec.GetCount(), Served: p.served}, nil
	default:
		return nil, grain.Reject("probe: unsupported request %T", msg)
	}
}

// OnReminder records the delivery durably (duplicates included).
func (p *probe) OnReminder(ctx context.Context, g grain.Context, fired *pb.ReminderFired) error {
	next := proto.Clone(p.rec).(*pb.ProbeRecord)
	next.Fires = append(next.Fires, &pb.ProbeFire{
		Name: fired.GetName(), DueAtMs: fired.GetDueAtMs(), ReceivedAtMs: p.now().UnixMilli(), Node: g.Node(),
	})
	return p.save(ctx, g, next)
}

func (p *probe) save(ctx context.Context, g grain.Context, next *pb.ProbeRecord) error {
	b, err := proto.Marshal(next)
	if err != nil {
		return fmt.Errorf("probe: encode record: %w", err)
	}
	if err := g.Save(ctx, b); err != nil {
		return fmt.Errorf("probe: save: %w", err)
	}
	p.rec = next
	return nil
}

func (p *probe) Deactivate(_ context.Context, g grain.Context, reason grain.Reason) {
	p.observe(g, false, reason)
}

func (p *probe) observe(g grain.Context, activated bool, reason grain.Reason) {
	if p.observer != nil {
		p.observer(Event{Identity: g.Identity(), Node: g.Node(), Epoch: g.Epoch(), Activated: activated, Reason: reason})
	}
}
