package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Text writes s as readable text (what `mcpgrain inspect session` prints).
func (s Session) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("session", s.ID)
	row("owner", s.User+" ("+s.Org+")")
	switch {
	case s.Passivated:
		row("state", fmt.Sprintf("passivated (no activation; epoch %d)", s.Epoch))
	case s.Resident:
		row("state", fmt.Sprintf("resident on %s (epoch %d)", s.OwnerNode, s.Epoch))
	default:
		row("state", fmt.Sprintf("activated on %s without a runtime (epoch %d)", s.OwnerNode, s.Epoch))
	}
	if s.Ended != "" {
		row("ended", s.Ended)
	}
	row("streams", fmt.Sprint(s.Streams))
	row("executions", fmt.Sprintf("%d paused (%d of them durable), %d running", s.Paused+s.DurablePaused, s.DurablePaused, s.Running))
	row("leases", list(s.Leases))
	var rs []string
	for _, r := range s.Reminders {
		rs = append(rs, r.Name+" due "+stamp(r.Due))
	}
	row("reminders", list(rs))
	if d := s.LastDispose; d != nil {
		row("last dispose", d.Reason+" at "+stamp(d.At))
	} else {
		row("last dispose", "none")
	}
	row("created", stamp(s.CreatedAt))
	row("last activity", stamp(s.LastActivity))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return writeRequests(w, s.Requests, s.RequestsNote)
}

// writeRequests writes a session's last requests, newest first.
func writeRequests(w io.Writer, reqs []Request, note string) error {
	if len(reqs) == 0 {
		if note == "" {
			note = "none"
		}
		_, err := fmt.Fprintf(w, "recent requests: %s\n", note)
		return err
	}
	fmt.Fprintln(w, "recent requests (newest first):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		id := r.TraceID
		if id == "" {
			id = "(no trace: tracing off)"
		}
		fmt.Fprintf(tw, "  %s\t%s\ttrace %s\n", stamp(r.At), r.Method, id)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return nil
}

// Text writes t as readable text.
func (t Task) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("task", t.ID)
	row("owner", t.User+" ("+t.Org+")")
	row("status", strings.TrimSpace(t.Status+" "+t.StatusMessage))
	if t.Passivated {
		row("state", "passivated (no activation)")
	} else {
		row("state", "activated on "+t.OwnerNode)
	}
	row("attempts", fmt.Sprint(t.Attempts))
	if !t.LeaseUntil.IsZero() {
		row("lease until", stamp(t.LeaseUntil))
	}
	row("created", stamp(t.CreatedAt))
	row("updated", stamp(t.UpdatedAt))
	row("expires", stamp(t.ExpiresAt))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return nil
}

// Text writes e (and its session) as readable text.
func (e Execution) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("execution", e.ID)
	row("owner", e.User+" ("+e.Org+")")
	if e.Settled.IsZero() {
		row("state", "paused, deadline "+stamp(e.Deadline))
	} else {
		row("state", "settled at "+stamp(e.Settled))
	}
	if e.Decision != "" {
		row("decision", e.Decision+" by "+e.DecidedBy)
	}
	if e.Message != "" {
		row("message", e.Message)
	}
	if e.SessionID != "" && e.Session == nil {
		row("session", e.SessionID+" (gone)")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	if e.Session == nil {
		return nil
	}
	fmt.Fprintln(w)
	return e.Session.Text(w)
}

func list(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ", ")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
