package exchange

import (
	"fmt"
	"sync"
	"testing"
)

// A Table holds what was stored until it is deleted, across its shards
// and under concurrent use (run with -race).
func TestTableStoresLoadsDeletes(t *testing.T) {
	var tb Table[int]
	if _, ok := tb.Load("absent"); ok || tb.Len() != 0 {
		t.Fatal("the zero Table holds something")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				k := fmt.Sprintf("%d-%d", g, i)
				tb.Store(k, i)
				if v, ok := tb.Load(k); !ok || v != i {
					t.Errorf("%s: %d %v after Store", k, v, ok)
				}
				if i%2 == 0 {
					tb.Delete(k)
				}
			}
		})
	}
	wg.Wait()
	if n := tb.Len(); n != 4*250 {
		t.Fatalf("%d values, want %d", n, 4*250)
	}
	for g := range 4 {
		for i := range 500 {
			v, ok := tb.Load(fmt.Sprintf("%d-%d", g, i))
			if ok != (i%2 == 1) || (ok && v != i) {
				t.Fatalf("%d-%d: %d %v", g, i, v, ok)
			}
		}
	}
}

// An exchange's entry in a warm Table (one that held entries before)
// costs nothing: sync.Map's cost two objects (the boxed key, its trie's
// node).
func TestTableAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	var tb Table[*responseStream]
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("x", i)
	}
	s := &responseStream{}
	i := 0
	allocs := testing.AllocsPerRun(len(keys)-1, func() {
		tb.Store(keys[i], s)
		if _, ok := tb.Load(keys[i]); !ok {
			t.Fatal("lost")
		}
		tb.Delete(keys[i])
		i++
	})
	t.Logf("%.2f allocations an entry", allocs)
	if allocs > 0.05 { // a shard's first map, in the first runs
		t.Fatalf("%.2f allocations an entry, want 0", allocs)
	}
}

// maxOpenAllocs bounds the objects of a response stream: the stream and
// its ready channel. 4 with a sync.Map (its key boxed, its node).
const maxOpenAllocs = 2

func TestOpenAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	r := &replies{}
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprint("x", i)
	}
	for _, k := range keys[:100] { // warm: every shard's map made
		r.open(k).close()
	}
	i := 100
	allocs := testing.AllocsPerRun(99, func() {
		r.open(keys[i]).close()
		i++
	})
	t.Logf("%.1f allocations a stream", allocs)
	if allocs > maxOpenAllocs {
		t.Fatalf("%.1f allocations a stream, want ≤ %d", allocs, maxOpenAllocs)
	}
}
