package exchange

import (
	"net/http"
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
