package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// BenchmarkAppendEvents is the event log's write path: one flush of the
// node's writer, 8 events of 1 KiB from 8 sessions of 4 principals (a
// tool call's answer is two or three events; the writer batches every
// session of the node each 10 ms).
func BenchmarkAppendEvents(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		benchAppendEvents(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv("MCPGRAIN_TEST_POSTGRES_URL") == "" {
			b.Skip("MCPGRAIN_TEST_POSTGRES_URL is not set")
		}
		s, err := store.Open(context.Background(), testenv.Postgres(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		benchAppendEvents(b, s)
	})
}

func benchAppendEvents(b *testing.B, s store.Store) {
	ctx := context.Background()
	data := make([]byte, 1<<10)
	idx := 0
	for b.Loop() {
		evs := make([]store.Event, 8)
		for i := range evs {
			evs[i] = benchEvent(fmt.Sprintf("s%d", i), fmt.Sprintf("u%d", i%4), idx, data)
		}
		idx++
		if err := appendEvents(ctx, s, evs); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEvent(session, user string, idx int, data []byte) store.Event {
	_ = user
	return store.Event{Session: session, Stream: "a", Index: idx, Data: data}
}

func appendEvents(ctx context.Context, s store.Store, evs []store.Event) error {
	return s.AppendEvents(ctx, evs)
}
