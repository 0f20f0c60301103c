package residency

import (
	"slices"
	"testing"
	"time"
)

// Trim asks the excess over a lowered cap to go: least recently active
// first, pinned ones skipped, at most limit a call, the ones already asked
// (inside their grace window) counted as going.
func TestTrim(t *testing.T) {
	for _, c := range []struct {
		name     string
		ids      []string // registered at 0, 1, 2, … ms, in this order
		pinned   []string
		marks    []mark
		inFlight int
		cap      int
		limit    int
		now      int64
		want     []string
		wantOver bool
	}{
		{name: "under the cap", ids: []string{"a", "b", "c"}, cap: 3, limit: 10},
		{name: "over: the least recently active", ids: []string{"a", "b", "c", "d", "e"}, cap: 2, limit: 10,
			want: []string{"a", "b", "c"}, wantOver: true},
		{name: "bounded by limit", ids: []string{"a", "b", "c", "d", "e"}, cap: 1, limit: 2,
			want: []string{"a", "b"}, wantOver: true},
		{name: "pinned skipped", ids: []string{"a", "b", "c", "d"}, pinned: []string{"a", "c"}, cap: 2, limit: 10,
			want: []string{"b", "d"}, wantOver: true},
		{name: "nothing evictable", ids: []string{"a", "b", "c"}, pinned: []string{"a", "b", "c"}, cap: 1, limit: 10,
			wantOver: true},
		{name: "asked ones count as going", ids: []string{"a", "b", "c", "d", "e"}, marks: []mark{{"a", 100}, {"b", 100}},
			cap: 2, limit: 10, now: 100, want: []string{"c"}, wantOver: true},
		// One asked but active since (it declined, or will) is further
		// back than the ones picked: it is not counted as going.
		{name: "asked beyond the picks not counted", ids: []string{"a", "b", "c", "d", "e"}, marks: []mark{{"e", 100}},
			cap: 3, limit: 10, now: 100, want: []string{"a", "b"}, wantOver: true},
		{name: "asked past the grace window are asked again", ids: []string{"a", "b", "c", "d"}, marks: []mark{{"a", 0}},
			cap: 3, limit: 10, now: DefaultEvictionGrace.Milliseconds(), want: []string{"a"}, wantOver: true},
		{name: "in-flight builds count", ids: []string{"a", "b", "c"}, inFlight: 2, cap: 3, limit: 10,
			want: []string{"a", "b"}, wantOver: true},
		{name: "limit 0", ids: []string{"a", "b"}, cap: 1, wantOver: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New(Config{SoftCap: 1000})
			for i, id := range c.ids {
				can := always
				if slices.Contains(c.pinned, id) {
					can = never
				}
				r.Register(Entry{ID: id, CanEvict: can}, at(int64(i)))
			}
			for _, m := range c.marks {
				r.MarkEvictionRequested(m.id, at(m.at))
			}
			for range c.inFlight {
				r.Admit(at(c.now))
			}
			r.SetSoftCap(c.cap)
			got, over := r.Trim(at(c.now), c.limit)
			if !slices.Equal(got, c.want) || over != c.wantOver {
				t.Fatalf("Trim = %v, %v; want %v, %v", got, over, c.want, c.wantOver)
			}
			if n := r.Counts(at(c.now)).EvictionPending; n != len(c.want)+pendingMarks(c.marks, c.now) {
				t.Fatalf("%d pending after Trim, want the %d asked plus the marks inside their window", n, len(c.want))
			}
		})
	}
}

// mark is an eviction request of id at ms.
type mark struct {
	id string
	at int64
}

// pendingMarks is how many of marks are inside the default grace window
// at now.
func pendingMarks(marks []mark, now int64) int {
	n := 0
	for _, m := range marks {
		if time.Duration(now-m.at)*time.Millisecond < DefaultEvictionGrace {
			n++
		}
	}
	return n
}

// Trimming on consecutive ticks converges on the cap without asking more
// than the excess: each tick counts the ones asked before and still
// there.
func TestTrimConverges(t *testing.T) {
	r := New(Config{SoftCap: 1000})
	for i := range 10 {
		r.Register(Entry{ID: string(rune('a' + i)), CanEvict: always}, at(int64(i)))
	}
	r.SetSoftCap(5)
	var asked []string
	for tick := range 3 {
		ids, _ := r.Trim(at(int64(100+tick)), 2)
		asked = append(asked, ids...)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(asked, want) {
		t.Fatalf("asked %v over three ticks before any went, want %v (the excess, once)", asked, want)
	}
	for _, id := range asked {
		r.Release(id)
	}
	if ids, over := r.Trim(at(200), 2); ids != nil || over {
		t.Fatalf("Trim at the cap = %v, %v; want nothing", ids, over)
	}
}
