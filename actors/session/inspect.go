package session

import (
	"context"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// recentRequests is how many requests an activation remembers for
// inspection (their trace ids, mostly).
const recentRequests = 16

// requestRing is an activation's last requests: a slice that grows with
// the requests seen up to recentRequests entries (most sessions see one or
// two before they go idle), then a ring. An entry is 32 bytes and holds
// no pointer into the request it was made from (the trace id is kept as
// its 16 bytes, the method as a code), so remembering a request keeps none
// of its decoded strings alive.
type requestRing struct {
	seen []seenRequest
	next int // index of the next write once the ring is full
}

// seenRequest is one entry of a requestRing.
type seenRequest struct {
	traceID [16]byte
	atMs    int64
	method  uint8 // index in seenMethods
	traced  bool  // traceID holds a trace id
}

// seenMethods are the methods an entry names; others are recorded as the
// first ("").
var seenMethods = [...]string{"", http.MethodPost, http.MethodGet, http.MethodDelete}

// add remembers a request of m at t (the oldest one falls out).
func (r *requestRing) add(m *pb.HttpExchange, t time.Time) {
	e := seenRequest{atMs: t.UnixMilli()}
	for i, name := range seenMethods {
		if name == m.GetMethod() {
			e.method = uint8(i)
		}
	}
	if id := traceIDOf(m.GetTraceContext()["traceparent"]); id != "" {
		_, err := hex.Decode(e.traceID[:], []byte(id))
		e.traced = err == nil
	}
	if len(r.seen) < recentRequests {
		r.seen = append(r.seen, e)
		return
	}
	r.seen[r.next] = e
	r.next = (r.next + 1) % recentRequests
}

// list is the ring's requests, oldest first.
func (r *requestRing) list() []*pb.RequestSeen {
	out := make([]*pb.RequestSeen, 0, len(r.seen))
	for i := range r.seen {
		e := r.seen[(r.next+i)%len(r.seen)]
		rs := &pb.RequestSeen{Method: seenMethods[e.method], AtMs: e.atMs}
		if e.traced {
			rs.TraceId = hex.EncodeToString(e.traceID[:])
		}
		out = append(out, rs)
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
