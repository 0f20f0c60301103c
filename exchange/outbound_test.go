package exchange

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// outboundRequest is a POST with n forwarded headers (Mcp-X-i) and one
// that is not forwarded.
func outboundRequest(n int) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp?x=1", strings.NewReader("{}"))
	r.Header = http.Header{"Cookie": {"not forwarded"}}
	for i := range n {
		r.Header[fmt.Sprintf("Mcp-X-%d", i)] = []string{fmt.Sprint(i), "more"}
	}
	return r
}

// The exchange message forwards every forwarded header with its values,
// whether they fit in the message's own allocation or not, and nothing
// else.
func TestOutboundForwardsEveryForwardedHeader(t *testing.T) {
	reply := actor.NewPID("gw:1", "replies")
	for _, n := range []int{0, 1, outboundHeaders - 1, outboundHeaders, outboundHeaders + 1, 3 * outboundHeaders} {
		r := outboundRequest(n)
		x, _, resume := outbound(r, Target{Body: []byte("{}")}, reply)
		if resume || x.GetMethod() != http.MethodPost || x.GetPath() != "/mcp" || x.GetRawQuery() != "x=1" || x.GetReplyId() != "replies" || x.GetExchangeId() == "" {
			t.Fatalf("%d headers: message %v", n, x)
		}
		var got []string
		for _, h := range x.GetHeaders() {
			got = append(got, h.GetName()+"="+strings.Join(h.GetValues(), ","))
		}
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("Mcp-X-%d=%d,more", i, i))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%d headers: forwarded %q, want %q", n, got, want)
		}
	}
}

// maxOutboundAllocs bounds the objects of a message with a client's usual
// headers: the message with its headers (one allocation) and its exchange
// id: 2 measured; 4 when the headers' messages and pointers had their own.
const maxOutboundAllocs = 2

func TestOutboundAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	r := outboundRequest(6)
	reply := actor.NewPID("gw:1", "replies")
	var x *pb.HttpExchange
	allocs := testing.AllocsPerRun(100, func() { x, _, _ = outbound(r, Target{}, reply) })
	t.Logf("%.1f allocations per exchange message (%d headers)", allocs, len(x.GetHeaders()))
	if allocs > maxOutboundAllocs {
		t.Fatalf("%.1f allocations per exchange message, want ≤ %d", allocs, maxOutboundAllocs)
	}
}
