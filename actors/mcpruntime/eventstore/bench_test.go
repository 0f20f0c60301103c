package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// BenchmarkAppendEvents is the event log's write path: one flush of the
// node's writer, events of 1 KiB, one per session, each principal with two
// sessions (a tool call's answer is two or three events; the writer
// batches every session of the node each 10 ms): 8 events (a quiet node)
// and 64 (a busy one).
func BenchmarkAppendEvents(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("sqlite/%d-events", n), func(b *testing.B) {
			s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			benchAppendEvents(b, eventstore.New(s), n)
		})
		b.Run(fmt.Sprintf("postgres/%d-events", n), func(b *testing.B) {
			if os.Getenv("MCPGRAIN_TEST_POSTGRES_URL") == "" {
				b.Skip("MCPGRAIN_TEST_POSTGRES_URL is not set")
			}
			s, err := store.Open(context.Background(), testenv.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			benchAppendEvents(b, eventstore.New(s), n)
		})
	}
}

func benchAppendEvents(b *testing.B, s *eventstore.Store, n int) {
	ctx := context.Background()
	data := make([]byte, 1<<10)
	idx := 0
	for b.Loop() {
		evs := make([]eventstore.Event, n)
		for i := range evs {
			evs[i] = benchEvent(fmt.Sprintf("s%d", i), fmt.Sprintf("u%d", i/2), idx, data)
		}
		idx++
		if err := appendEvents(ctx, s, evs); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEvent(session, user string, idx int, data []byte) eventstore.Event {
	return eventstore.Event{Session: session, Stream: "a", Index: idx, Data: data, Org: "o", User: user}
}

func appendEvents(ctx context.Context, s *eventstore.Store, evs []eventstore.Event) error {
	_, err := s.AppendEvents(ctx, evs)
	return err
}

// BenchmarkAppendWarmCalls is the event log's write path under one
// session's sequential warm calls: each call stores one event (its
// response; go-sdk's priming event stays in memory) of ~200 B on a new
// stream of the same session, and a flush carries the calls of its
// window (ns/op is per flush). It reports the process's CPU time per
// call (getrusage: the SQLite writer runs in the process).
func BenchmarkAppendWarmCalls(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("sqlite/%d-calls", n), func(b *testing.B) {
			s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			data := make([]byte, 200)
			call := 0
			cpu0 := cpuTime()
			for b.Loop() {
				evs := make([]eventstore.Event, n)
				for i := range evs {
					evs[i] = eventstore.Event{Session: "warm-session", Stream: fmt.Sprintf("%016x", call*2654435761), Index: 1, Data: data, Org: "o", User: "u"}
					call++
				}
				if err := appendEvents(ctx, eventstore.New(s), evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(call)/1e3, "cpu-µs/call")
		})
	}
}

// cpuTime is the process's CPU time (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
