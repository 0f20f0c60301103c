package approvals

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Bounds of an [Inbox].
const (
	// InboxPendingLimit is how many waiting executions an inbox shows.
	InboxPendingLimit = 100
	// InboxHistoryLimit is how many recent settlements it shows.
	InboxHistoryLimit = 20
)

// recordTimeout bounds writing a decision to the history.
const recordTimeout = 5 * time.Second

// Inbox is an organization's approvals inbox: what waits, and what was
// settled lately.
type Inbox struct {
	// Pending are the waiting executions, newest first (latest deadline:
	// every pause gets the same approval window).
	Pending []*pb.PausedExecution
	// More reports that more executions wait than Pending holds.
	More bool
	// Recent are the latest settlements, most recent first.
	Recent []Settlement
}

// Settlement is one entry of an inbox's history.
type Settlement struct {
	ExecutionID string
	Tool        string
	RequestedBy string
	// DecidedBy is the deciding user ("" if nobody decided on an approval
	// surface).
	DecidedBy string
	// Outcome is "accepted", "declined", "cancelled", "timed out" or
	// "answered in its session".
	Outcome string
	// Reason is why it was declined ("" if not said).
	Reason string
	At     time.Time
}

// Inbox returns the caller organization's inbox, from the directory (no
// session is woken for it).
func (s *Service) Inbox(ctx context.Context, who *pb.Principal) (Inbox, error) {
	pending, err := s.List(ctx, who)
	if err != nil {
		return Inbox{}, err
	}
	rows, err := s.dir.ListDecided(ctx, who.GetOrg(), InboxHistoryLimit)
	if err != nil {
		return Inbox{}, fmt.Errorf("%w: list decisions: %v", ErrUnavailable, err)
	}
	in := Inbox{Pending: newestFirst(pending, InboxPendingLimit)}
	in.More = len(pending) > len(in.Pending)
	for _, r := range rows {
		if r.Org != who.GetOrg() { // the store filters; this is belt and braces
			continue
		}
		in.Recent = append(in.Recent, Settlement{ExecutionID: r.ID, Tool: r.Address, RequestedBy: r.User,
			DecidedBy: r.DecidedBy, Outcome: outcome(r), Reason: r.Reason, At: r.Settled})
	}
	return in, nil
}

// newestFirst sorts list by deadline, latest first, and keeps at most
// limit.
func newestFirst(list []*pb.PausedExecution, limit int) []*pb.PausedExecution {
	out := append([]*pb.PausedExecution(nil), list...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].GetDeadlineMs() != out[j].GetDeadlineMs() {
			return out[i].GetDeadlineMs() > out[j].GetDeadlineMs()
		}
		return out[i].GetExecutionId() < out[j].GetExecutionId()
	})
	return out[:min(len(out), limit)]
}

// outcome names how a settled directory row settled.
func outcome(r directory.Execution) string {
	switch r.Decision {
	case "accept":
		return "accepted"
	case "decline":
		return "declined"
	case "cancel":
		return "cancelled"
	}
	if !r.Settled.Before(r.Deadline) {
		return "timed out"
	}
	return "answered in its session"
}

// Key identifies what an inbox shows, times left aside: a live view
// redraws when it changes.
func (in Inbox) Key() string {
	var b strings.Builder
	for _, p := range in.Pending {
		b.WriteString(p.GetExecutionId())
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "|%v|", in.More)
	for _, r := range in.Recent {
		b.WriteString(r.ExecutionID + "=" + r.Outcome + " ")
	}
	return b.String()
}

// reasonOf is the "reason" string of a decision's content ("" if none),
// as the directory keeps it ([directory.ReasonShown]).
func reasonOf(content map[string]any) string {
	r, _ := content["reason"].(string)
	return directory.ReasonShown(r)
}

// record keeps who's decision (and its reason) in the directory for the
// inbox's history. The decision is made: a failure here loses only its
// history entry.
func (s *Service) record(ctx context.Context, who *pb.Principal, execID, action, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := s.dir.RecordDecision(ctx, execID, who.GetUser(), action, reason, s.now()); err != nil {
		s.log.Warn("approvals: record decision", "execution", execID, "err", err)
	}
}

// Settled returns how execution execID of who's organization settled
// (ok=false if it is not settled, not in the directory, or another
// organization's): what a decided execution's page says.
func (s *Service) Settled(ctx context.Context, who *pb.Principal, execID string) (Settlement, bool) {
	r, err := s.dir.GetExecution(ctx, execID)
	if err != nil || r.Settled.IsZero() || r.Org != who.GetOrg() {
		return Settlement{}, false
	}
	return Settlement{ExecutionID: r.ID, Tool: r.Address, RequestedBy: r.User, DecidedBy: r.DecidedBy,
		Outcome: outcome(r), Reason: r.Reason, At: r.Settled}, true
}

// Sentence says what became of the execution, and who decided it: "Accepted
// by alice at 2026-12-06 21:00:00 UTC." (and why, for a decline with a
// reason).
func (st Settlement) Sentence() string {
	s := strings.ToUpper(st.Outcome[:1]) + st.Outcome[1:]
	if st.DecidedBy != "" {
		s += " by " + st.DecidedBy
	}
	s += " at " + st.At.UTC().Format("2006-01-02 15:04:05 UTC") + "."
	if st.Reason != "" {
		s += " Reason: " + st.Reason
	}
	return s
}
