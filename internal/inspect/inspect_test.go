package inspect

import (
	"bytes"
	"strings"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestAllowed(t *testing.T) {
	for _, c := range []struct {
		role, org, of string
		want          bool
	}{
		{"admin", "acme", "acme", true},
		{"admin", "acme", "", true},
		{"admin", "globex", "acme", false},
		{"member", "acme", "acme", false},
		{"viewer", "acme", "acme", false},
		{"", "acme", "", false},
	} {
		if got := Allowed(&pb.Principal{User: "u", Org: c.org, Role: c.role}, c.of); got != c.want {
			t.Errorf("Allowed(%s of %s, %q) = %v, want %v", c.role, c.org, c.of, got, c.want)
		}
	}
}

// A snapshot's facts reach the text: owner, state, reminders, the last
// disposal and the requests newest first.
func TestSessionText(t *testing.T) {
	s := FromSnapshot("s1", &pb.SessionSnapshot{Exists: true, Resident: true, Node: "n2", Epoch: 3,
		Principal:    &pb.Principal{User: "alice", Org: "acme"},
		RemindersDue: []*pb.ReminderDue{{Name: "expiry", DueAtMs: 2_000}},
		LastDispose:  &pb.Disposal{Reason: "cap", AtMs: 1_000},
		RecentRequests: []*pb.RequestSeen{{Method: "POST", AtMs: 1_500, TraceId: "aaaa"},
			{Method: "GET", AtMs: 1_600}}})
	var b bytes.Buffer
	if err := s.Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"alice (acme)", "resident on n2 (epoch 3)", "expiry due 1970-01-01T00:00:02Z", "cap at 1970-01-01T00:00:01Z", "(no trace: tracing off)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "GET") > strings.Index(out, "trace aaaa") {
		t.Errorf("requests not newest first:\n%s", out)
	}
	var p bytes.Buffer
	if err := (Session{ID: "s2", Passivated: true, RequestsNote: notePassivated}).Text(&p); err != nil || !strings.Contains(p.String(), "passivated") || !strings.Contains(p.String(), notePassivated) {
		t.Errorf("passivated text: %v\n%s", err, p.String())
	}
}
