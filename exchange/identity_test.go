package exchange

import (
	"net/http"
	"strings"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A Caller survives its header whatever its fields hold: the separator, a
// value that looks like another field, empty fields, a session id with
// dots (it is the value's rest, not encoded).
func TestCallerRoundTrip(t *testing.T) {
	for _, c := range []Caller{
		{},
		{Session: "s1"},
		{User: "alice", Org: "acme", Role: "member", Origin: "http://mcp.example:8080", Mode: "native", Session: "g-1"},
		{User: "a.b.c", Org: ".", Role: "..", Origin: "http://h", Mode: "x.1.y", Sessionless: true, Session: "s.with.dots"},
		{User: "ünï\x00", Org: "o=1;r=admin", Mode: "browser&role=admin", Sessionless: true},
	} {
		h := c.Header()
		if len(h) != 1 || len(h[HeaderIdentity]) != 1 {
			t.Fatalf("%+v: header %v, want one field of one value", c, h)
		}
		if got := CallerOf(h); got != c {
			t.Errorf("CallerOf(%q) = %+v, want %+v", h.Get(HeaderIdentity), got, c)
		}
		if got := SessionOf(h); got != c.Session {
			t.Errorf("SessionOf(%q) = %q, want %q", h.Get(HeaderIdentity), got, c.Session)
		}
		if p := PrincipalOf(h); p.GetUser() != c.User || p.GetOrg() != c.Org || p.GetRole() != c.Role {
			t.Errorf("PrincipalOf(%q) = %v", h.Get(HeaderIdentity), p)
		}
	}
}

// A header without an identity, or with one that does not decode, tells
// nobody: no principal, no role, no session.
func TestCallerOfMalformed(t *testing.T) {
	for _, v := range []string{"", "alice", "YWxpY2U.....", "YWxpY2U.b.c.d.e", "!!!.YQ.YQ.YQ.YQ..s1", "YQ.YQ.YQ=.YQ.YQ..s1"} {
		h := http.Header{HeaderIdentity: {v}}
		if c := CallerOf(h); c != (Caller{}) {
			t.Errorf("CallerOf(%q) = %+v, want the zero Caller", v, c)
		}
	}
	if c, s := CallerOf(nil), SessionOf(nil); c != (Caller{}) || s != "" {
		t.Errorf("nil header: %+v %q", c, s)
	}
	// The old, one-field-an-item headers are no identity.
	old := http.Header{"X-Mcpgrain-User": {"YWxpY2U"}, "X-Mcpgrain-Role": {"YWRtaW4"}, "X-Mcpgrain-Session": {"s1"}}
	if c := CallerOf(old); c != (Caller{}) {
		t.Errorf("the old headers read as %+v", c)
	}
}

// Identity takes the principal from the exchange, the mode from its query,
// the origin from its host.
func TestIdentityOfAnExchange(t *testing.T) {
	m := &pb.HttpExchange{Host: "mcp.test", RawQuery: "x=1&elicitation_mode=browser",
		Principal: &pb.Principal{User: "u", Org: "o", Role: "r"}}
	want := Caller{User: "u", Org: "o", Role: "r", Origin: "http://mcp.test", Mode: "browser", Session: "g1"}
	if got := CallerOf(Identity(m, "g1", false)); got != want {
		t.Errorf("Identity: %+v, want %+v", got, want)
	}
	want.Sessionless = true
	if got := CallerOf(Identity(m, "g1", true)); got != want {
		t.Errorf("Identity, sessionless: %+v, want %+v", got, want)
	}
	if got := ApprovalURL("", Identity(m, "g1", false), "e1"); got != "http://mcp.test/approve/e1" {
		t.Errorf("ApprovalURL at the origin: %q", got)
	}
}

// IdentityValue is Identity's one value, for every host length (the
// origin is built on the stack up to 96 bytes, on the heap beyond) and
// fields longer than 32 bytes (encoded without a copy).
func TestIdentityValueIsIdentitys(t *testing.T) {
	for _, host := range []string{"", "mcp.test", strings.Repeat("h", 89), strings.Repeat("h", 90), strings.Repeat("h", 300)} {
		m := &pb.HttpExchange{Host: host, RawQuery: "elicitation_mode=url",
			Principal: &pb.Principal{User: strings.Repeat("u", 40), Org: "o", Role: "r"}}
		for _, sessionless := range []bool{false, true} {
			want := HeaderValue(Identity(m, "g1", sessionless), HeaderIdentity)
			if got := IdentityValue(m, "g1", sessionless); got != want {
				t.Errorf("host of %d bytes: IdentityValue %q, Identity's %q", len(host), got, want)
			}
			if c := CallerOf(http.Header{HeaderIdentity: {want}}); c.Origin != "http://"+host || c.User != m.Principal.User {
				t.Errorf("host of %d bytes: %+v", len(host), c)
			}
		}
	}
}

// maxIdentityAllocs bounds the objects of a warm request's identity: its
// encoded value. Identity's header, which Start took before, was 5 (the
// origin, the bytes and their string, the map and its slice; 4 now).
const maxIdentityAllocs = 1

func TestIdentityValueAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	m := &pb.HttpExchange{Host: "mcp.example.com:8443", Principal: &pb.Principal{User: "alice@example.com", Org: "acme", Role: "member"}}
	var v string
	allocs := testing.AllocsPerRun(100, func() { v = IdentityValue(m, "s-0123456789abcdef0123456789abcdef", false) })
	header := testing.AllocsPerRun(100, func() { _ = Identity(m, "s-0123456789abcdef0123456789abcdef", false) })
	t.Logf("%.1f allocations per identity (%d bytes); %.1f for Identity's header", allocs, len(v), header)
	if allocs > maxIdentityAllocs {
		t.Fatalf("%.1f allocations per identity, want ≤ %d", allocs, maxIdentityAllocs)
	}
}

// maxCallerOfAllocs bounds the objects of reading a caller: the decoded
// fields' one string. 2 before (their bytes, then a copy as a string).
const maxCallerOfAllocs = 1

func TestCallerOfAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	h := Caller{User: "alice@example.com", Org: "acme", Role: "member", Origin: "http://mcp.example.com:8443/" + strings.Repeat("p", 40), Session: "s-1"}.Header()
	var c Caller
	allocs := testing.AllocsPerRun(100, func() { c = CallerOf(h) })
	t.Logf("%.1f allocations a caller", allocs)
	if c.User != "alice@example.com" || c.Session != "s-1" {
		t.Fatalf("caller %+v", c)
	}
	if allocs > maxCallerOfAllocs {
		t.Fatalf("%.1f allocations a caller, want ≤ %d", allocs, maxCallerOfAllocs)
	}
}
