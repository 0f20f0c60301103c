package approvals

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// TestInboxShowsDeclineReasonAndDecidedPageSaysWhatAndWho: a decline's
// reason is in the inbox's history, and the decided execution's page says
// it was declined, by whom and why — to its organization only.
func TestInboxShowsDeclineReasonAndDecidedPageSaysWhatAndWho(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	alice := &pb.Principal{User: "alice", Org: "acme"}
	decline := url.Values{"action": {"decline"}, "csrf": {f.p.csrf(alice, "exec_acme")}}
	if st := f.post(t, "/approvals/exec_acme", tAlice, decline); st != http.StatusSeeOther {
		t.Fatalf("alice's decline: %d", st)
	}
	if _, body := f.get(t, "/approvals", tBob); !strings.Contains(body, `class="what">declined<`) ||
		!strings.Contains(body, `class="why">declined in the approvals inbox<`) {
		t.Fatalf("history lacks the decline's reason:\n%s", body)
	}
	status, body := f.get(t, "/approve/exec_acme", tBob)
	if status != http.StatusOK || !strings.Contains(body, "Already declined") ||
		!strings.Contains(body, "Declined by alice at ") || !strings.Contains(body, "Reason: declined in the approvals inbox") {
		t.Fatalf("decided page: %d\n%s", status, body)
	}
	if _, body := f.get(t, "/approve/exec_acme", tCarol); strings.Contains(body, "alice") {
		t.Fatalf("another organization sees who decided:\n%s", body)
	}
}
