package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The lifecycle tests run the session grain against a fakeRuntime. These
// run some of the same scenarios against the real go-sdk runtime
// (actors/mcpruntime), whose Close really ends a go-sdk session and
// flushes its event log: a lifecycle step that closed a runtime twice,
// or served a request on a closed one, shows here and not with the fake.

// realBuilds builds real runtimes and counts them per session.
type realBuilds struct {
	b  *mcpruntime.Builder
	mu sync.Mutex
	n  map[string]int
	rt map[string]session.Runtime // the latest by session
}

func (r *realBuilds) Build(ctx context.Context, in session.BuildInput) (session.Runtime, error) {
	rt, err := r.b.Build(ctx, in)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.n[in.SessionID]++
	r.rt[in.SessionID] = rt
	r.mu.Unlock()
	return rt, nil
}

func (r *realBuilds) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[id]
}

// newRealEnv is newEnv whose sessions get real go-sdk runtimes.
func newRealEnv(t *testing.T, softCap int, policy alarm.Policy) (*env, *realBuilds) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st, Logger: logger(),
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			return mcp.NewServer(&mcp.Implementation{Name: "real-runtime-test"}, opts), func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rb := &realBuilds{b: b, n: map[string]int{}, rt: map[string]session.Runtime{}}
	e := newEnvWith(t, softCap, policy, func(c *session.Config) { c.Builder = rb })
	t.Cleanup(b.Close) // after the node stops (cleanups run last first)
	return e, rb
}

// TestExpiryAndDeleteEndTheSession with real runtimes.
func TestRealRuntimeExpiryAndDeleteEndTheSession(t *testing.T) {
	e, rb := newRealEnv(t, 32, shortPolicy())
	e.create("gone")
	e.create("kept")
	if r := e.do("gone", &pb.SessionDelete{Principal: alice}).(*pb.SessionReply); r.GetStatus() != pb.SessionReply_STATUS_OK || e.disposals("delete") != 1 {
		t.Fatalf("delete: %v, disposals %v", r.GetStatus(), e.disposals("delete"))
	}
	if r := e.access("gone", alice); r.GetStatus() != pb.SessionReply_STATUS_ENDED {
		t.Fatalf("after delete: %v", r.GetStatus())
	}
	e.clk.Advance(3 * time.Minute)
	eventually(t, "idle passivation", func() bool { return e.disposals("idle") == 1 })
	e.clk.Advance(time.Hour)
	eventually(t, "tombstone deletion", func() bool {
		_, err := e.st.Load(context.Background(), "session/gone")
		return errors.Is(err, store.ErrNotFound)
	})
	if r := e.access("gone", alice); r.GetStatus() != pb.SessionReply_STATUS_NOT_FOUND {
		t.Fatalf("after the tombstone's deletion: %v", r.GetStatus())
	}
	e.clk.Advance(24 * time.Hour)
	eventually(t, "expiry", func() bool { return e.inspect("kept").GetEnded() == "expired" })
	if r := e.access("kept", alice); r.GetStatus() != pb.SessionReply_STATUS_ENDED {
		t.Fatalf("after expiry: %v", r.GetStatus())
	}
	if n := rb.count("kept"); n != 1 {
		t.Fatalf("%d builds of the expired session, want 1 (expiry rebuilt a passivated runtime)", n)
	}
}

// TestConcurrentDisposalsCloseOnce with a real runtime: the idle alarm and
// a cap eviction race; one disposal closes it, and the session restores
// into a new runtime on its next request.
func TestRealRuntimeConcurrentDisposalsCloseOnce(t *testing.T) {
	e, rb := newRealEnv(t, 32, shortPolicy())
	e.create("s1")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.node.Request(ctx, session.KindName, "s1", &pb.RequestCapEviction{})
	}()
	e.clk.Advance(3 * time.Minute)
	wg.Wait()
	eventually(t, "one disposal", func() bool { return e.disposals("cap")+e.disposals("idle") == 1 })
	if r := e.access("s1", alice); r.GetStatus() != pb.SessionReply_STATUS_OK || !r.GetRestored() {
		t.Fatalf("after the disposal: %v restored %v", r.GetStatus(), r.GetRestored())
	}
	if n := rb.count("s1"); n != 2 {
		t.Fatalf("%d builds, want 2 (the first, disposed once; the restore)", n)
	}
	if d := e.disposals("cap") + e.disposals("idle"); d != 1 {
		t.Fatalf("%v disposals, want 1", d)
	}
}
