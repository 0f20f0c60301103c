package exchange

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A response stream that watched its grain unwatches it when it closes:
// protoactor does not, so every request of a long-lived session used to
// leave its dead stream in the grain's watcher set (and, across nodes, in
// the endpoint watcher), which grew for the activation's whole life and
// was sent a Terminated per entry when it stopped.
func TestClosedResponseStreamUnwatchesItsGrain(t *testing.T) {
	sys := actor.NewActorSystem()
	grainPID := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	stream := newResponseStream(sys)
	var toStream atomic.Int32
	sub := sys.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok && dl.PID.Equal(stream.pid) {
			if _, terminated := dl.Message.(*actor.Terminated); terminated {
				toStream.Add(1)
			}
		}
	})
	defer sys.EventStream.Unsubscribe(sub)

	stream.watch(grainPID)
	// A message after the watch comes back through the stream once the
	// actor has handled the watch (one mailbox, in order).
	sys.Root.Send(stream.pid, "after the watch")
	select {
	case <-stream.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream actor did not hand over a message")
	}
	close(stream.done)
	// Wait for the stream actor to stop (its unwatch is sent while it
	// stops, before the grain's stop below in the grain's mailbox).
	if err := sys.Root.StopFuture(stream.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	// The grain's stop notifies its watchers before the future completes;
	// a Terminated to the dead stream is published as a dead letter then.
	if err := sys.Root.StopFuture(grainPID).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := toStream.Load(); n != 0 {
		t.Fatalf("the stopped grain still had the closed stream among its watchers (%d Terminated sent to it)", n)
	}
}
