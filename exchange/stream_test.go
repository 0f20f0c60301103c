package exchange

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// handedOver waits for the stream to queue something and returns what it
// queued.
func handedOver(t *testing.T, s *responseStream) []any {
	t.Helper()
	select {
	case <-s.ready:
		return s.take()
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the stream")
		return nil
	}
}

// followingCount is how many streams the follower holds for grain, once
// it handled everything sent to it before.
func followingCount(t *testing.T, sys *actor.ActorSystem, f *followers, grain *actor.PID) int {
	t.Helper()
	n, err := sys.Root.RequestFuture(f.actor(), &following{grain: grain}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n.(int)
}

// A closed response stream leaves nothing behind: the replies no longer
// route its exchange id and the follower no longer holds it, so neither
// a later frame nor its grain's end reaches it (protoactor keeps a
// removed watcher reachable; a stream watching its grain itself used to
// stay alive as long as the grain).
func TestClosedResponseStreamLeavesNothingBehind(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	r := newReplies(sys)
	f := r.followers
	stream := r.open("x1")
	stream.watch(grainPID)
	if n := followingCount(t, sys, f, grainPID); n != 1 {
		t.Fatalf("%d streams follow the grain, want 1", n)
	}
	stream.close()
	if n := followingCount(t, sys, f, grainPID); n != 0 {
		t.Fatalf("the follower still holds %d streams of the grain after the close", n)
	}
	if _, ok := r.streams.Load("x1"); ok {
		t.Fatal("the replies still route the closed stream's exchange")
	}
	sys.Root.Send(r.pid, &pb.ExchangeFrame{ExchangeId: "x1", Data: []byte("late")})
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	if q := stream.take(); len(q) != 0 {
		t.Fatalf("the closed stream was handed %v", q)
	}
}

// Frames reach the stream of their exchange id, each stream's in the
// order they were sent, whatever else arrives meanwhile.
func TestRepliesHandEachFrameToItsExchangeInOrder(t *testing.T) {
	sys := actor.NewActorSystem()
	r := newReplies(sys)
	a, b := r.open("a"), r.open("b")
	defer a.close()
	defer b.close()
	const n = 200
	for i := range n {
		sys.Root.Send(r.pid, &pb.ExchangeFrame{ExchangeId: "a", Data: []byte{byte(i)}})
		sys.Root.Send(r.pid, &pb.ExchangeFrame{ExchangeId: "b", Data: []byte{byte(i)}})
		sys.Root.Send(r.pid, &pb.ExchangeFrame{ExchangeId: "nobody"}) // dropped
		sys.Root.Send(r.pid, "not a frame")                           // dropped
	}
	for name, s := range map[string]*responseStream{"a": a, "b": b} {
		var got []any
		for len(got) < n {
			got = append(got, handedOver(t, s)...)
		}
		for i, m := range got {
			fr, ok := m.(*pb.ExchangeFrame)
			if !ok || fr.GetExchangeId() != name || fr.GetData()[0] != byte(i) {
				t.Fatalf("stream %s: item %d is %v", name, i, m)
			}
		}
		if len(got) != n {
			t.Fatalf("stream %s got %d items, want %d", name, len(got), n)
		}
	}
}

// Every stream following a grain hears it stop, through one watch; a
// stream that closed before hears nothing.
func TestStreamsFollowingAGrainHearItStop(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	r := newReplies(sys)
	f := r.followers
	open1, open2, closed := r.open("1"), r.open("2"), r.open("3")
	defer open1.close()
	defer open2.close()
	for _, s := range []*responseStream{open1, open2, closed} {
		s.watch(grainPID)
	}
	closed.close()
	if n := followingCount(t, sys, f, grainPID); n != 2 {
		t.Fatalf("%d streams follow the grain, want the 2 open ones", n)
	}
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*responseStream{open1, open2} {
		if q := handedOver(t, s); len(q) != 1 || q[0] != (grainGone{}) {
			t.Fatalf("stream %d got %v, want grainGone", i, q)
		}
	}
	if n := followingCount(t, sys, f, grainPID); n != 0 {
		t.Fatalf("the follower still holds %d streams of the stopped grain", n)
	}
}

// A stream that starts following a grain already gone hears it at once.
func TestStreamFollowingADeadGrainHearsItIsGone(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	r := newReplies(sys)
	s := r.open("x")
	defer s.close()
	s.watch(grainPID)
	if q := handedOver(t, s); len(q) != 1 || q[0] != (grainGone{}) {
		t.Fatalf("got %v, want grainGone", q)
	}
}
