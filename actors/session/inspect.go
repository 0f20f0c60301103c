package session

import (
	"context"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// recentRequests is how many requests an activation remembers for
// inspection (their trace ids, mostly).
const recentRequests = 16

// requestRing is an activation's last requests, a fixed ring: adding one
// allocates nothing.
type requestRing struct {
	seen [recentRequests]seenRequest
	next int // index of the next write
	n    int // entries held (≤ recentRequests)
}

// seenRequest is one entry of a requestRing.
type seenRequest struct {
	method, traceID string
	at              time.Time
}

// add remembers a request of m at t (the oldest one falls out).
func (r *requestRing) add(m *pb.HttpExchange, t time.Time) {
	r.seen[r.next] = seenRequest{method: m.GetMethod(), traceID: traceIDOf(m.GetTraceContext()["traceparent"]), at: t}
	r.next = (r.next + 1) % recentRequests
	r.n = min(r.n+1, recentRequests)
}

// list is the ring's requests, oldest first.
func (r *requestRing) list() []*pb.RequestSeen {
	out := make([]*pb.RequestSeen, 0, r.n)
	for i := range r.n {
		e := r.seen[(r.next-r.n+i+recentRequests)%recentRequests]
		out = append(out, &pb.RequestSeen{Method: e.method, AtMs: e.at.UnixMilli(), TraceId: e.traceID})
	}
	return out
}

// traceIDOf is the trace id of a W3C traceparent ("00-<32 hex>-<16
// hex>-<2 hex>"); "" if tp is not one.
func traceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	return tp[3:35]
}

// snapshot answers SessionInspect: the activation's view of the session
// (operators' inspection, tests).
func (s *session) snapshot(ctx context.Context, g grain.Context) *pb.SessionSnapshot {
	sn := &pb.SessionSnapshot{Exists: s.rec != nil, Resident: s.rt != nil, LastActivityMs: s.last.UnixMilli(), Node: g.Node(),
		Principal: s.rec.GetPrincipal(), CreatedAtMs: s.rec.GetCreatedAtMs(), Epoch: g.Epoch(),
		LastDispose: s.rec.GetLastDispose(), RecentRequests: s.recent.list()}
	if s.disposed != nil {
		sn.LastDispose = s.disposed
	}
	if s.rec.GetTombstone() != nil {
		sn.Ended = s.rec.GetTombstone().GetReason()
	}
	if s.rt != nil {
		sn.Streams, sn.Paused, sn.Running = int32(s.rt.ActiveStreams()), int32(s.rt.PausedExecutions()), int32(s.rt.RunningExecutions())
		sn.DurablePaused = int32(s.rt.DurablePausedExecutions())
	}
	sn.Leases = s.m.leaseIDs()
	if rs, err := g.Reminders(ctx); err == nil {
		for _, r := range rs {
			sn.Reminders = append(sn.Reminders, r.Name)
			sn.RemindersDue = append(sn.RemindersDue, &pb.ReminderDue{Name: r.Name, DueAtMs: r.DueAt.UnixMilli()})
		}
	}
	return sn
}
