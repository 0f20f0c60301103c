package session

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestTraceIDOf(t *testing.T) {
	for _, c := range []struct{ tp, want string }{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c"},
		{"", ""},
		{"00-0af7651916cd43dd8448eb211c80319c", ""},
		{"garbage-that-is-long-enough-to-be-sliced-but-not-a-traceparent", ""},
	} {
		if got := traceIDOf(c.tp); got != c.want {
			t.Errorf("traceIDOf(%q) = %q, want %q", c.tp, got, c.want)
		}
	}
}

// The ring keeps the last recentRequests requests, oldest first.
func TestRequestRingKeepsTheLastRequests(t *testing.T) {
	var r requestRing
	if got := r.list(); len(got) != 0 {
		t.Fatalf("empty ring lists %d", len(got))
	}
	t0 := time.UnixMilli(1_000_000)
	total := recentRequests + 5
	for i := range total {
		tp := fmt.Sprintf("00-%032x-b7ad6b7169203331-01", i)
		r.add(&pb.HttpExchange{Method: "POST", TraceContext: map[string]string{"traceparent": tp}}, t0.Add(time.Duration(i)*time.Millisecond))
	}
	got := r.list()
	if len(got) != recentRequests {
		t.Fatalf("ring holds %d, want %d", len(got), recentRequests)
	}
	for i, e := range got {
		n := total - recentRequests + i
		if e.GetTraceId() != fmt.Sprintf("%032x", n) || e.GetAtMs() != t0.UnixMilli()+int64(n) || e.GetMethod() != "POST" {
			t.Fatalf("entry %d = %+v, want request %d", i, e, n)
		}
	}
}
