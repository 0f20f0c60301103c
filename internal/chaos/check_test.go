package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestSingleOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks []Ack
		want string
	}{
		{"none", nil, ""},
		{"one owner", []Ack{{1, 1, "a"}, {2, 1, "a"}, {3, 1, "a"}}, ""},
		{"handover", []Ack{{3, 2, "b"}, {1, 1, "a"}, {2, 1, "a"}, {4, 3, "a"}}, ""},
		{"stale write after takeover", []Ack{{1, 1, "a"}, {2, 2, "b"}, {3, 1, "a"}}, "overlapping owners"},
		{"same count twice", []Ack{{1, 1, "a"}, {2, 1, "a"}, {2, 2, "b"}}, "acknowledged twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(SingleOwner("g", tc.acks), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("SingleOwner = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCounter(t *testing.T) {
	for _, tc := range []struct {
		final          int64
		acked, unknown int
		want           string
	}{
		{10, 10, 0, ""},
		{11, 10, 2, ""},
		{12, 10, 2, ""},
		{9, 10, 5, "lost"},
		{13, 10, 2, "applied twice"},
	} {
		got := strings.Join(Counter("g", tc.final, tc.acked, tc.unknown), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Fatalf("Counter(%d, %d, %d) = %q, want %q", tc.final, tc.acked, tc.unknown, got, tc.want)
		}
	}
}

func TestLiveness(t *testing.T) {
	outs := []Outcome{
		{What: "ok", Took: time.Second, OK: true},
		{What: "retry", Took: 2 * time.Second, Retryable: true, Err: "503"},
		{What: "slow", Took: 11 * time.Second, OK: true},
		{What: "broken", Took: time.Second, Err: "404 session not found"},
	}
	got := Liveness(outs, 10*time.Second)
	if len(got) != 2 || !strings.Contains(got[0], "slow") || !strings.Contains(got[1], "broken") {
		t.Fatalf("Liveness = %q", got)
	}
}

func TestGrowth(t *testing.T) {
	if v := Growth("goroutines", []float64{100, 140, 149}, 1.5, 0); len(v) != 0 {
		t.Fatalf("within bound: %v", v)
	}
	if v := Growth("goroutines", []float64{100, 120, 151}, 1.5, 0); len(v) != 1 || !strings.Contains(v[0], "round 3") {
		t.Fatalf("over bound: %v", v)
	}
	if v := Growth("rss", []float64{100}, 1, 0); v != nil {
		t.Fatalf("one sample: %v", v)
	}
}
