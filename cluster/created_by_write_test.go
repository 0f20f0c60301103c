package cluster_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A CreatedByWrite grain (sessions are) that is only asked about leaves
// nothing in the store; its first write takes ownership; and if another
// activation created it meanwhile, that first write is fenced and the
// request lands, once, on the grain as it now is.
func TestCreatedByWriteGrainOwnsAtItsFirstWrite(t *testing.T) {
	st := openStore(t)
	kind := probe.Kind(probe.Options{})
	kind.CreatedByWrite = true
	node := startNode(t, cluster.Config{Kinds: []grain.Kind{kind}, Membership: membership.NewNetwork().Provider(), Store: st})
	ctx := context.Background()
	load := func(id string) (store.Ownership, error) { return st.Load(ctx, grain.Key(probe.KindName, id)) }

	// Reads only: no row.
	if s := add(t, node, "guess", 0); s.GetEpoch() != 0 || s.GetCount() != 0 {
		t.Fatalf("read of a grain never written: %+v", s)
	}
	if _, err := load("guess"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a read-only activation wrote its row: %v", err)
	}
	// The first write creates it, at epoch 1.
	if s := add(t, node, "guess", 2); s.GetEpoch() != 1 || s.GetCount() != 2 {
		t.Fatalf("first write: %+v", s)
	}
	if o, err := load("guess"); err != nil || o.Epoch != 1 || o.Owner != node.ID() {
		t.Fatalf("row after the first write: %+v %v", o, err)
	}

	// An activation that found no row, while another activation creates
	// the grain. (Stands in for a creator on another node: the store
	// writes are exactly what that activation's Acquire and Save do.)
	if s := add(t, node, "raced", 0); s.GetEpoch() != 0 {
		t.Fatalf("raced before creation: %+v", s)
	}
	other, err := st.Acquire(ctx, grain.Key(probe.KindName, "raced"), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := proto.Marshal(&pb.ProbeRecord{Count: 40})
	if err := st.Save(ctx, other.Grain, other.Epoch, rec); err != nil {
		t.Fatal(err)
	}
	s := add(t, node, "raced", 2)
	if s.GetCount() != 42 || s.GetEpoch() <= other.Epoch {
		t.Fatalf("write after a concurrent creation: %+v, want count 42 at an epoch after %d", s, other.Epoch)
	}
	o, err := load("raced")
	var got pb.ProbeRecord
	if err != nil || proto.Unmarshal(o.Record, &got) != nil || got.GetCount() != 42 {
		t.Fatalf("stored: %+v %v (count %d), want 42", o, err, got.GetCount())
	}
}

// lookups counts the store's AcquireExisting calls: how often an
// activation looked for its grain's row.
type lookups struct {
	store.Store
	n atomic.Int32
}

func (l *lookups) AcquireExisting(ctx context.Context, grain, node string) (store.Ownership, error) {
	l.n.Add(1)
	return l.Store.AcquireExisting(ctx, grain, node)
}

// An activation started for a request that creates its grain
// (grain.Kind.Creates) does not look for a row — that lookup is a write
// transaction of its own — and other activations still do. If the row
// exists after all, the creating write is fenced and the request lands,
// once, on the grain as it is, through an activation that looked.
func TestCreatingRequestSkipsTheLookupForItsRow(t *testing.T) {
	st := &lookups{Store: openStore(t)}
	kind := probe.Kind(probe.Options{})
	kind.CreatedByWrite = true
	kind.Creates = func(first proto.Message) bool {
		a, ok := first.(*pb.ProbeAdd)
		return ok && a.GetDelta() > 100
	}
	node := startNode(t, cluster.Config{Kinds: []grain.Kind{kind}, Membership: membership.NewNetwork().Provider(), Store: st})
	ctx := context.Background()

	if s := add(t, node, "fresh", 101); s.GetEpoch() != 1 || s.GetCount() != 101 {
		t.Fatalf("creating request: %+v", s)
	}
	if n := st.n.Load(); n != 0 {
		t.Fatalf("the creating request's activation looked for its row %d times", n)
	}
	if s := add(t, node, "known", 0); s.GetEpoch() != 0 {
		t.Fatalf("read of a grain never written: %+v", s)
	}
	if n := st.n.Load(); n != 1 {
		t.Fatalf("an activation for a request that does not create looked %d times, want 1", n)
	}

	// The row exists (written elsewhere) when a creating request comes.
	other, err := st.Acquire(ctx, grain.Key(probe.KindName, "taken"), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := proto.Marshal(&pb.ProbeRecord{Count: 40})
	if err := st.Save(ctx, other.Grain, other.Epoch, rec); err != nil {
		t.Fatal(err)
	}
	s := add(t, node, "taken", 101)
	if s.GetCount() != 141 || s.GetEpoch() <= other.Epoch {
		t.Fatalf("creating request for an existing grain: %+v, want count 141 at an epoch after %d", s, other.Epoch)
	}
	if n := st.n.Load(); n != 2 {
		t.Fatalf("lookups after the fenced create: %d, want 2 (the retry's activation looked)", n)
	}
}
