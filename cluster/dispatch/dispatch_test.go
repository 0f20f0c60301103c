package dispatch_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpgrain/mcpgrain/cluster/dispatch"
)

// Work scheduled one after another runs on the same goroutine, kept idle
// in between; work scheduled while every goroutine is busy gets a new one
// at once instead of waiting.
func TestWarmReusesIdleGoroutinesAndNeverWaits(t *testing.T) {
	d := dispatch.NewWarm(4, 300)
	ids := make(chan uint64, 1)
	d.Schedule(func() { ids <- goid() })
	first := <-ids
	for i := range 20 {
		// The goroutine is on the idle list once its function returned;
		// a function that returns right after sending may not be there
		// yet, so this one waits for it (the next Schedule would start
		// another goroutine otherwise, which is allowed).
		waitIdle(t, d)
		d.Schedule(func() { ids <- goid() })
		if id := <-ids; id != first {
			t.Fatalf("sequential function %d ran on goroutine %d, the first on %d", i, id, first)
		}
	}

	// 16 at once, each blocked until all 16 run: only possible if none
	// waits for another to finish.
	var wg sync.WaitGroup
	release := make(chan struct{})
	var running atomic.Int32
	for range 16 {
		wg.Add(1)
		d.Schedule(func() {
			defer wg.Done()
			if running.Add(1) == 16 {
				close(release)
			}
			<-release
		})
	}
	select {
	case <-release:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d of 16 scheduled functions ran at once", running.Load())
	}
	wg.Wait()
}

// waitIdle returns once a goroutine of d waits on its idle list.
func waitIdle(t *testing.T, d *dispatch.Warm) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for d.Idle() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no goroutine went idle after its work")
		}
		runtime.Gosched()
	}
}

// goid is a goroutine's identity for the test: the address of a value
// on its stack would move, so it asks the runtime.
func goid() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	var id uint64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// Actors on a warm dispatcher process their messages in order, as on
// protoactor's default one.
func TestActorsOnAWarmDispatcherKeepTheirOrder(t *testing.T) {
	sys := actor.NewActorSystem()
	d := dispatch.NewWarm(8, 300)
	const actors, msgs = 8, 500
	var wg sync.WaitGroup
	bad := make(chan string, actors)
	pids := make([]*actor.PID, actors)
	for i := range pids {
		next := 0
		wg.Add(1)
		pids[i] = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if n, ok := c.Message().(int); ok {
				if n != next {
					bad <- "out of order"
				}
				next++
				if next == msgs {
					wg.Done()
				}
			}
		}, actor.WithDispatcher(d)))
	}
	for n := range msgs {
		for _, p := range pids {
			sys.Root.Send(p, n)
		}
	}
	wg.Wait()
	select {
	case b := <-bad:
		t.Fatal(b)
	default:
	}
}
