package exchange

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// deadLetters counts the messages of type T that went to pid after it
// stopped.
func deadLetters[T any](t *testing.T, sys *actor.ActorSystem, pid *actor.PID) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	sub := sys.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok && dl.PID.Equal(pid) {
			if _, is := dl.Message.(T); is {
				n.Add(1)
			}
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })
	return &n
}

// handedOver waits for the stream to hand over a message.
func handedOver(t *testing.T, s *responseStream) any {
	t.Helper()
	select {
	case m := <-s.ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the stream actor did not hand over a message")
		return nil
	}
}

// A closed response stream leaves nothing in its grain's watcher set: the
// grain is watched by the forwarder's followers, not by each stream, so a
// grain that stops sends nothing to streams that closed before (protoactor
// keeps a removed watcher reachable, and a stream watching its grain
// itself used to keep its dead actor alive for the grain's whole life).
func TestClosedResponseStreamLeavesNothingInItsGrain(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	f := &followers{system: sys}
	stream := newResponseStream(sys, f)
	terminated := deadLetters[*actor.Terminated](t, sys, stream.pid)
	gone := deadLetters[grainGone](t, sys, stream.pid)

	stream.watch(grainPID)
	stream.close()
	if err := sys.Root.StopFuture(stream.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFollowerIdle(t, sys, f) // the follow and the unfollow were handled
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFollowerIdle(t, sys, f)
	if n := terminated.Load() + gone.Load(); n != 0 {
		t.Fatalf("the stopped grain still reached the closed stream (%d Terminated, %d grainGone)", terminated.Load(), gone.Load())
	}
}

// waitFollowerIdle returns once the follower actor handled everything
// sent to it before (a Terminated, a system message, is handled before
// the messages queued ahead of it).
func waitFollowerIdle(t *testing.T, sys *actor.ActorSystem, f *followers) {
	t.Helper()
	// A follow of an already dead process comes back as its Terminated,
	// after every message already in the follower's mailbox.
	dead := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := sys.Root.StopFuture(dead).Wait(); err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	watcher := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(grainGone); ok {
			close(got)
		}
	}))
	defer sys.Root.Stop(watcher)
	f.follow(dead, watcher)
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not report a dead grain")
	}
}

// Every stream following a grain hears it stop, through one watch; a
// stream that closed before hears nothing.
func TestStreamsFollowingAGrainHearItStop(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	f := &followers{system: sys}
	open1, open2, closed := newResponseStream(sys, f), newResponseStream(sys, f), newResponseStream(sys, f)
	defer open1.close()
	defer open2.close()
	goneToClosed := deadLetters[grainGone](t, sys, closed.pid)
	for _, s := range []*responseStream{open1, open2, closed} {
		s.watch(grainPID)
	}
	closed.close()
	waitFollowerIdle(t, sys, f) // the follows and the unfollow were handled
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*responseStream{open1, open2} {
		if m := handedOver(t, s); m != (grainGone{}) {
			t.Fatalf("stream %d got %#v, want grainGone", i, m)
		}
	}
	waitFollowerIdle(t, sys, f)
	if n := goneToClosed.Load(); n != 0 {
		t.Fatalf("a stream closed before its grain stopped was sent grainGone %d times", n)
	}
}

// A stream that starts following a grain already gone hears it at once.
func TestStreamFollowingADeadGrainHearsItIsGone(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	f := &followers{system: sys}
	s := newResponseStream(sys, f)
	defer s.close()
	s.watch(grainPID)
	if m := handedOver(t, s); m != (grainGone{}) {
		t.Fatalf("got %#v, want grainGone", m)
	}
}
