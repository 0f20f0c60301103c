package eventstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

func TestEventLogAppendReplayAndDelete(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := eventstore.New(st)
		ctx := context.Background()
		var evs []eventstore.Event
		for i := range 5 {
			evs = append(evs, eventstore.Event{Session: "s1", Stream: "a", Index: i, Data: []byte{byte('0' + i)}})
		}
		evs = append(evs, eventstore.Event{Session: "s1", Stream: "b", Index: 0, Data: nil}, eventstore.Event{Session: "s2", Stream: "a", Index: 0, Data: []byte("x")})
		if _, err := s.AppendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
		// Re-appending a stored index (a retried flush) changes nothing.
		if _, err := s.AppendEvents(ctx, []eventstore.Event{{Session: "s1", Stream: "a", Index: 4, Data: []byte("other")}}); err != nil {
			t.Fatal(err)
		}
		data, last, err := s.Events(ctx, "s1", "a", 1)
		if err != nil || last != 4 || len(data) != 3 || string(data[0]) != "2" || string(data[2]) != "4" {
			t.Fatalf("after 1: %q last %d err %v", data, last, err)
		}
		if data, last, _ := s.Events(ctx, "s1", "a", 4); len(data) != 0 || last != 4 {
			t.Fatalf("after the end: %q last %d", data, last)
		}
		if data, last, _ := s.Events(ctx, "s1", "nope", -1); len(data) != 0 || last != -1 {
			t.Fatalf("unknown stream: %q last %d", data, last)
		}
		if data, _, _ := s.Events(ctx, "s1", "b", -1); len(data) != 1 || data[0] == nil || len(data[0]) != 0 {
			t.Fatalf("empty event: %q", data)
		}
		if err := s.DeleteEvents(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if _, last, _ := s.Events(ctx, "s1", "a", -1); last != -1 {
			t.Fatal("events survived DeleteEvents")
		}
		if data, _, _ := s.Events(ctx, "s2", "a", -1); len(data) != 1 {
			t.Fatal("DeleteEvents touched another session")
		}
	})
}

func TestEventLogPrunesByAge(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := eventstore.New(st)
		ctx := context.Background()
		if _, err := s.AppendEvents(ctx, []eventstore.Event{{Session: "s1", Stream: "a", Index: 0, Data: []byte("x")}, {Session: "s2", Stream: "b", Index: 0}}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PruneEvents(ctx, time.Now().Add(-time.Minute)); err != nil || n != 0 {
			t.Fatalf("pruning before the events were stored: %d %v", n, err)
		}
		if data, _, _ := s.Events(ctx, "s1", "a", -1); len(data) != 1 {
			t.Fatal("a young event was pruned")
		}
		if n, err := s.PruneEvents(ctx, time.Now().Add(time.Minute)); err != nil || n != 2 {
			t.Fatalf("pruning after: %d %v, want 2", n, err)
		}
		if _, last, _ := s.Events(ctx, "s1", "a", -1); last != -1 {
			t.Fatal("an old event survived")
		}
	})
}

// TrimEvents keeps a session's newest events within a byte budget and
// drops the oldest first; other sessions are untouched, and a resume from
// before the dropped events sees the gap.
func TestEventLogTrimsOldestFirstToABudget(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := eventstore.New(st)
		ctx := context.Background()
		ten := []byte("0123456789")
		for batch := range 2 {
			var evs []eventstore.Event
			for i := range 4 {
				evs = append(evs, eventstore.Event{Session: "s1", Stream: "a", Index: batch*4 + i, Data: ten})
			}
			if _, err := s.AppendEvents(ctx, evs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AppendEvents(ctx, []eventstore.Event{{Session: "s2", Stream: "a", Index: 0, Data: ten}}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.TrimEvents(ctx, "s1", 80); err != nil || n != 0 {
			t.Fatalf("trim within the budget: dropped %d, %v", n, err)
		}
		// 80 bytes stored, keep at most 55: the three oldest go.
		if n, err := s.TrimEvents(ctx, "s1", 55); err != nil || n != 3 {
			t.Fatalf("trim to 55 bytes: dropped %d, %v, want 3", n, err)
		}
		if data, last, err := s.Events(ctx, "s1", "a", 2); err != nil || last != 7 || len(data) != 5 {
			t.Fatalf("the newest events: %d events, last %d, %v", len(data), last, err)
		}
		if _, _, err := s.Events(ctx, "s1", "a", 0); err == nil {
			t.Fatal("a resume from before the dropped events did not see the gap")
		}
		if data, _, _ := s.Events(ctx, "s2", "a", -1); len(data) != 1 {
			t.Fatal("trimming s1 touched s2")
		}
	})
}

// A flush larger than one statement's rows lands whole and in order, and
// a retried flush that overlaps what is stored (duplicates within one
// statement included) keeps the stored events and adds the rest.
func TestEventLogAppendsLargeBatches(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) {
		s := eventstore.New(st)
		ctx := context.Background()
		batch := func(from, to int, tag string) []eventstore.Event {
			var evs []eventstore.Event
			for i := from; i < to; i++ {
				evs = append(evs, eventstore.Event{Session: "s", Stream: "a", Index: i, Data: []byte(fmt.Sprintf("%s%d", tag, i))})
			}
			return evs
		}
		if _, err := s.AppendEvents(ctx, batch(0, 150, "first-")); err != nil {
			t.Fatal(err)
		}
		retry := append(batch(140, 200, "retry-"), batch(195, 200, "dup-")...)
		if _, err := s.AppendEvents(ctx, retry); err != nil {
			t.Fatal(err)
		}
		data, last, err := s.Events(ctx, "s", "a", -1)
		if err != nil || last != 199 || len(data) != 200 {
			t.Fatalf("replay: %d events, last %d, err %v; want 200, 199", len(data), last, err)
		}
		for i, d := range data {
			want := fmt.Sprintf("first-%d", i)
			if i >= 150 {
				want = fmt.Sprintf("retry-%d", i)
			}
			if string(d) != want {
				t.Fatalf("event %d = %q, want %q", i, d, want)
			}
		}
	})
}
