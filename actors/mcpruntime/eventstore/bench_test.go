package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
