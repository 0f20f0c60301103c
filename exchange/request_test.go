package exchange

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The grain's request is what the gateway forwarded: its path and query as
// they are, the headers under their canonical names, the identity headers
// in place of any of the same name, and no field sharing storage with the
// message (the gateway's own request's values) or with another field.
func TestRequestRebuildsTheForwardedRequest(t *testing.T) {
	accept := []string{"application/json", "text/event-stream"}
	m := &pb.HttpExchange{
		Method: http.MethodPost, Path: "/mcp/a b", RawQuery: "elicitation_mode=url&x=%2F", Host: "h:1",
		Body: []byte(`{"jsonrpc":"2.0"}`),
		Headers: []*pb.HttpHeader{
			{Name: "Accept", Values: accept},
			{Name: "mcp-session-id", Values: []string{"S1"}},
			{Name: "x-mcpgrain-identity", Values: []string{Caller{User: "forged", Role: "admin", Session: "G2"}.Encode()}},
			{Name: "X-Empty"},
		},
		Principal: &pb.Principal{User: "u", Org: "o", Role: "r"},
	}
	req, err := request(t.Context(), m, IdentityValue(m, "G1", false))
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != http.MethodPost || req.URL.Path != "/mcp/a b" || req.URL.RawQuery != m.RawQuery || req.Host != "h:1" ||
		req.ContentLength != int64(len(m.Body)) || req.Context() != t.Context() {
		t.Errorf("request %s %q %q host %q length %d", req.Method, req.URL.Path, req.URL.RawQuery, req.Host, req.ContentLength)
	}
	if got := req.Header.Values("Accept"); !slices.Equal(got, accept) {
		t.Errorf("Accept %q", got)
	}
	if got := req.Header.Get("Mcp-Session-Id"); got != "S1" {
		t.Errorf("Mcp-Session-Id %q (a lower-case name must be canonical)", got)
	}
	if p := PrincipalOf(req.Header); p.GetUser() != "u" || p.GetOrg() != "o" || p.GetRole() != "r" {
		t.Errorf("principal %v: the identity header must replace the forwarded one", p)
	}
	if n := len(req.Header.Values(HeaderIdentity)); n != 1 {
		t.Errorf("%d identity values, want the grain's alone", n)
	}
	if c := CallerOf(req.Header); c.Mode != "url" || c.Session != "G1" || c.Origin != "http://h:1" || c.Sessionless {
		t.Errorf("caller %+v", c)
	}
	if _, ok := req.Header["X-Empty"]; ok {
		t.Error("a header without values is forwarded")
	}
	// A handler appending to or overwriting a field touches neither the
	// message nor the next field.
	req.Header.Add("Accept", "*/*")
	req.Header["Accept"][0] = "changed"
	if accept[0] != "application/json" || req.Header.Get("Mcp-Session-Id") != "S1" {
		t.Errorf("a handler's change reached the message (%q) or another field (%q)", accept, req.Header.Get("Mcp-Session-Id"))
	}
	if got := req.Header.Values("Accept"); len(got) != 3 {
		t.Errorf("Accept after Add %q", got)
	}
	if r0, err := Request(&pb.HttpExchange{Method: http.MethodGet}); err != nil || r0.URL.Path != "/mcp" || r0.Body != http.NoBody {
		t.Errorf("empty path or body: %v %v", r0, err)
	}
}

// The body reads as the message's, and RequestBody returns all of it
// again after the handler read it; a request made otherwise has none.
func TestRequestBodyReadsAgain(t *testing.T) {
	m := &pb.HttpExchange{Method: http.MethodPost, Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"x"}`)}
	req, err := Request(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(req.Body)
	if err != nil || string(got) != string(m.Body) || req.Body.Close() != nil {
		t.Fatalf("body %q, %v", got, err)
	}
	if again, ok := RequestBody(req); !ok || string(again) != string(m.Body) {
		t.Errorf("RequestBody after the read: %q %v", again, ok)
	}
	if _, ok := RequestBody(httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("x"))); ok {
		t.Error("RequestBody of a request not rebuilt from an exchange")
	}
}

// HeaderValue reads what Get reads, for the canonical names it is given.
func TestHeaderValueReadsAsGet(t *testing.T) {
	h := http.Header{}
	h.Add(HeaderIdentity, "a")
	h.Add(HeaderIdentity, "b")
	h.Add("mcp-session-id", "S")
	h["X-Empty"] = []string{}
	for _, name := range []string{HeaderIdentity, "Mcp-Session-Id", "X-Empty", "X-Absent"} {
		if got, want := HeaderValue(h, name), h.Get(name); got != want {
			t.Errorf("HeaderValue(%s) = %q, Get %q", name, got, want)
		}
	}
	for _, name := range []string{HeaderIdentity, HeaderRestored, "Mcp-Session-Id", "Mcp-Protocol-Version"} {
		if textproto.CanonicalMIMEHeaderKey(name) != name {
			t.Errorf("%s is not canonical: HeaderValue would miss it", name)
		}
	}
}

// A response's head is a copy: a handler changing its header after the
// head went out changes nothing sent. Whether its fields fit in the
// frame's own allocation or not.
func TestHeadFrameCopiesTheHeader(t *testing.T) {
	for _, extra := range []int{0, headFields - 3, headFields - 2, headFields, 3 * headFields} {
		h := http.Header{"Content-Type": {"text/event-stream"}, "X-Two": {"a", "b"}, "X-None": {}}
		for i := range extra {
			h[fmt.Sprintf("X-%d", i)] = []string{fmt.Sprint(i)}
		}
		want := h.Clone()
		f := headFrameOf(h)
		h["X-Two"][0] = "changed"
		h["X-Added"] = []string{"later"}
		got := http.Header{}
		for _, hd := range f.GetHead().GetHeaders() {
			got[hd.GetName()] = hd.GetValues()
		}
		if len(got) != len(want) || len(got["X-None"]) != 0 {
			t.Fatalf("%d more fields: %v, want %v", extra, got, want)
		}
		for k, vs := range want {
			if !slices.Equal(got[k], vs) && len(vs) > 0 {
				t.Errorf("%d more fields: %s = %q, want %q", extra, k, got[k], vs)
			}
		}
	}
}

// maxHeadFrameAllocs bounds the objects of a response's first frame with
// go-sdk's four fields: the frame with its head and fields (one
// allocation); 5 before (frame, head, fields, their pointers, values).
const maxHeadFrameAllocs = 1

func TestHeadFrameAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache, no-transform"},
		"Connection": {"keep-alive"}, "Mcp-Session-Id": {"s-1"}}
	var f *pb.ExchangeFrame
	allocs := testing.AllocsPerRun(100, func() { f = headFrameOf(h) })
	t.Logf("%.1f allocations per first frame (%d fields)", allocs, len(f.GetHead().GetHeaders()))
	if allocs > maxHeadFrameAllocs {
		t.Fatalf("%.1f allocations per first frame, want ≤ %d", allocs, maxHeadFrameAllocs)
	}
}

// The relay adds a head's fields as Header.Add would: under canonical
// names, after any value already set, and an append to a field copies.
func TestAddHeaderAddsAsHeaderAdd(t *testing.T) {
	vs := []string{"a", "b"}
	h := http.Header{"X-Set": {"0"}}
	addHeader(h, []*pb.HttpHeader{{Name: "x-set", Values: []string{"1"}}, {Name: "X-Two", Values: vs}, {Name: "X-None"}})
	want := http.Header{}
	want.Add("X-Set", "0")
	want.Add("x-set", "1")
	want.Add("X-Two", "a")
	want.Add("X-Two", "b")
	if len(h) != len(want) || !slices.Equal(h["X-Set"], want["X-Set"]) || !slices.Equal(h["X-Two"], want["X-Two"]) {
		t.Errorf("header %v, want %v", h, want)
	}
	h.Add("X-Two", "c")
	if !slices.Equal(vs, []string{"a", "b"}) || len(h["X-Two"]) != 3 {
		t.Errorf("an Add after the head reached its values: %q %q", vs, h["X-Two"])
	}
}

// maxRequestHeaderAllocs bounds the objects of a request's header with a
// client's usual 6 forwarded fields and the caller's identity: the map
// (its table a second object) and one slice of all values, as when the
// identity came in a header of its own (which Start merged and dropped).
const maxRequestHeaderAllocs = 3

func TestRequestHeaderAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	m := &pb.HttpExchange{Host: "h:1", Principal: &pb.Principal{User: "u"}}
	for i := range 6 {
		m.Headers = append(m.Headers, &pb.HttpHeader{Name: fmt.Sprintf("Mcp-X-%d", i), Values: []string{"v"}})
	}
	id := IdentityValue(m, "G1", false)
	var h http.Header
	allocs := testing.AllocsPerRun(100, func() { h = requestHeader(m, id) })
	t.Logf("%.1f allocations per request header (%d fields)", allocs, len(h))
	if len(h) != 7 || HeaderValue(h, HeaderIdentity) != id {
		t.Fatalf("header %v", h)
	}
	if allocs > maxRequestHeaderAllocs {
		t.Fatalf("%.1f allocations per request header, want ≤ %d", allocs, maxRequestHeaderAllocs)
	}
}

// A request's header is the forwarded one with the identity, whether it
// fits in the map the request was made with or not.
func TestRequestHeaderOfAnySize(t *testing.T) {
	for _, n := range []int{0, 1, smallHeader - 1, smallHeader, smallHeader + 1, 3 * smallHeader} {
		m := &pb.HttpExchange{Method: http.MethodPost, Host: "h:1", Principal: &pb.Principal{User: "u"}, Body: []byte("{}")}
		for i := range n {
			m.Headers = append(m.Headers, &pb.HttpHeader{Name: fmt.Sprintf("mcp-x-%d", i), Values: []string{fmt.Sprint(i), "more"}})
		}
		id := IdentityValue(m, "G1", false)
		req, err := request(t.Context(), m, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(req.Header) != n+1 || HeaderValue(req.Header, HeaderIdentity) != id {
			t.Fatalf("%d fields: header %v", n, req.Header)
		}
		for i := range n {
			if got := req.Header.Values(fmt.Sprintf("Mcp-X-%d", i)); !slices.Equal(got, []string{fmt.Sprint(i), "more"}) {
				t.Errorf("%d fields: Mcp-X-%d = %q", n, i, got)
			}
		}
	}
}

// maxRequestAllocs bounds the objects of a warm call's rebuilt request
// (6 forwarded fields and the identity): the request, its URL, its
// header's table and values, its body. 7 before: the request's own
// header map was made, dropped and another made for the fields.
const maxRequestAllocs = 6

func TestRequestAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	m := &pb.HttpExchange{Method: http.MethodPost, Host: "h:1", Principal: &pb.Principal{User: "u"}, Body: []byte("{}")}
	for i := range 6 {
		m.Headers = append(m.Headers, &pb.HttpHeader{Name: fmt.Sprintf("Mcp-X-%d", i), Values: []string{"v"}})
	}
	id := IdentityValue(m, "G1", false)
	ctx := t.Context()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := request(ctx, m, id); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per request", allocs)
	if allocs > maxRequestAllocs {
		t.Fatalf("%.1f allocations per request, want ≤ %d", allocs, maxRequestAllocs)
	}
}
