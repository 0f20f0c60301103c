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

// A ring not yet full lists what it holds, oldest first; a request without
// a trace context lists no trace id, a method it does not name lists "".
func TestRequestRingPartlyFilled(t *testing.T) {
	var r requestRing
	t0 := time.UnixMilli(2_000_000)
	r.add(&pb.HttpExchange{Method: "GET"}, t0)
	r.add(&pb.HttpExchange{Method: "PATCH", TraceContext: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}, t0.Add(time.Millisecond))
	got := r.list()
	if len(got) != 2 || cap(r.seen) > 2 {
		t.Fatalf("ring lists %d (holds %d), want 2 (2)", len(got), cap(r.seen))
	}
	if got[0].GetMethod() != "GET" || got[0].GetTraceId() != "" || got[0].GetAtMs() != t0.UnixMilli() {
		t.Errorf("first entry %+v", got[0])
	}
	if got[1].GetMethod() != "" || got[1].GetTraceId() != "0af7651916cd43dd8448eb211c80319c" || got[1].GetAtMs() != t0.UnixMilli()+1 {
		t.Errorf("second entry %+v", got[1])
	}
}
