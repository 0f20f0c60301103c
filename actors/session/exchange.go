package session

import (
	"context"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// saveState steps the machine with a runtime's new state (for a session
// being created, the machine commits the creation itself: record, expiry
// reminder, ownership, one transaction).
func (s *session) saveState(ctx context.Context, g grain.Context, m *stateMsg) error {
	return s.step(ctx, g, event{kind: evStateReported, stale: m.h != s.hooks || s.rt == nil, found: s.rec != nil, ended: s.ended,
		state: m.state, name: m.name, app: m.app})
}

// saveAppState writes an application state value into the record
// (actSaveState with app), fenced by the activation's epoch.
func (s *session) saveAppState(ctx context.Context, g grain.Context, name string, v *pb.AppState) error {
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	if rec.AppState == nil {
		rec.AppState = map[string]*pb.AppState{}
	}
	rec.AppState[name] = v
	return s.commit(ctx, g, rec, store.Writes{})
}

// saveRuntimeState writes the runtime's state into the record
// (actSaveState).
func (s *session) saveRuntimeState(ctx context.Context, g grain.Context, state []byte) error {
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	rec.RuntimeState = state
	return s.commit(ctx, g, rec, store.Writes{})
}

// commitCreating writes the session being created into existence with the
// runtime's state (actCommitCreate), then tells the machine. The record
// keeps the creating record's principal, not a copy: the runtime, built
// from the creating record, holds that one for the session's life, and
// principals are never changed in place (a copy was ~0.1 KB more a
// resident session).
func (s *session) commitCreating(ctx context.Context, g grain.Context, state []byte) error {
	rec := proto.Clone(s.creating).(*pb.SessionRecord)
	rec.Principal = s.creating.GetPrincipal()
	rec.RuntimeState = state
	if err := s.commitCreate(ctx, g, rec); err != nil {
		return err
	}
	return s.step(ctx, g, event{kind: evCreated})
}

// exchange starts serving one tunnelled HTTP exchange: it checks the
// principal (creating the session for an initialize without session id),
// makes sure the runtime is resident, and runs go-sdk's handler in its own
// goroutine, streaming the response to the gateway's replies process. The grain
// goes on handling messages meanwhile.
func (s *session) exchange(ctx context.Context, g grain.Context, m *pb.HttpExchange) (proto.Message, error) {
	started := func(st pb.SessionReply_Status) *pb.ExchangeStarted {
		return &pb.ExchangeStarted{Status: st, Node: g.Node(), GrainAddress: g.Self().GetAddress(), GrainId: g.Self().GetId()}
	}
	adm, err := s.admitExchange(ctx, g, m)
	if err != nil || adm.status != pb.SessionReply_STATUS_OK || !adm.serve {
		if err != nil {
			return nil, err
		}
		return started(adm.status), nil
	}
	m = adm.m
	es := s.rt
	post := m.GetMethod() == http.MethodPost
	if post {
		s.res.posts.Add(1) // in this turn: whatever the grain decides next sees it
	}
	answer := g.Defer() // exchange.Start answers, with the response's first frame
	cancel, err := exchange.Start(ctx, g.ActorSystem(), g.Self(), m, exchange.IdentityValue(m, s.id, false), s.handler(es, adm), exchange.AckWith(answer, started(pb.SessionReply_STATUS_OK)))
	if err != nil {
		if post {
			s.res.posts.Add(-1)
		}
		answer(nil, grain.Reject("session: %v", err))
		return nil, nil
	}
	s.markActivity()
	if s.exchanges == nil {
		s.exchanges = map[string]context.CancelFunc{}
	}
	s.recent.add(m, s.now())
	s.exchanges[m.GetExchangeId()] = cancel
	return nil, nil // answered by exchange.Start
}

// admission is what the machine decided about a request that may create
// the session or serve an exchange (filled in by the actions it decided).
type admission struct {
	status     pb.SessionReply_Status // not OK: answer with it, serve nothing
	principal  *pb.Principal          // the caller
	m          *pb.HttpExchange       // the exchange to serve (a standalone stream's without Last-Event-ID)
	standalone bool                   // the standalone GET stream
	serve      bool                   // serve it (not parked, nothing refused)
	restored   bool                   // serving it restored the runtime
}

// admitExchange steps the machine with an exchange asking to be served:
// the machine creates the session (initialize) or checks the caller owns
// it, parks a standalone stream of a hibernated session, and otherwise
// makes sure the runtime is resident before it is served.
func (s *session) admitExchange(ctx context.Context, g grain.Context, m *pb.HttpExchange) (*admission, error) {
	adm := &admission{principal: m.GetPrincipal(), m: m}
	e := event{kind: evExchange, create: m.GetCreate(), noPrincipal: m.GetPrincipal().GetUser() == "", parkedLeft: len(s.parked)}
	if e.standalone = !e.create && exchange.StandaloneStream(m); e.standalone {
		adm.standalone, adm.m = true, exchange.WithoutLastEventID(m)
	}
	return s.admitRequest(ctx, g, e, adm)
}

// handler is the HTTP handler serving an admitted exchange: the runtime's,
// with a fresh priming event id on a standalone stream, and for a POST the
// in-flight count released and the restored header set.
func (s *session) handler(es Runtime, adm *admission) http.HandlerFunc {
	switch {
	case adm.standalone:
		id := s.h.primeID()
		return func(w http.ResponseWriter, r *http.Request) {
			es.ServeExchange(exchange.PrimingWriter(w, id), r)
		}
	case adm.m.GetMethod() == http.MethodPost:
		res, restored := s.res, adm.restored
		return func(w http.ResponseWriter, r *http.Request) {
			defer res.posts.Add(-1)
			if restored {
				w.Header().Set(exchange.HeaderRestored, "1")
			}
			es.ServeExchange(w, r)
		}
	}
	return es.ServeExchange
}

// park holds a standalone GET stream open without restoring the runtime
// (actPark; the machine decides to park it and ends the oldest parked one
// beyond maxParkedStreams).
//
// A hibernated session has no runtime, so nothing can be sent on its
// standalone stream. Restoring the runtime for the GET alone would count a
// client that merely keeps its stream open as active: with more such
// clients than the residency cap, every eviction closes a stream, the
// client reconnects a second later, the restore evicts the next least
// recently active session, and the node thrashes forever. So the stream is
// answered at once (200, text/event-stream, no events) and held until the
// session restores for a real request, ends or moves; then it ends
// cleanly and the client reconnects to the live runtime (or learns the
// session is gone). Parking is not activity: it neither touches the LRU
// nor delays the idle or expiry policy.
func (s *session) park(ctx context.Context, g grain.Context, m *pb.HttpExchange) error {
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	wake, gauge, id := s.wake, &s.h.parked, s.h.primeID()
	cancel, err := exchange.Start(ctx, g.ActorSystem(), g.Self(), m, "", func(w http.ResponseWriter, r *http.Request) {
		gauge.Add(1)
		defer gauge.Add(-1)
		exchange.WriteParkedHead(w, id)
		select {
		case <-wake:
		case <-r.Context().Done():
		}
	}, nil)
	if err != nil {
		return grain.Reject("session: %v", err)
	}
	s.parkSeq++
	if s.parked == nil {
		s.parked = map[string]parkedStream{}
	}
	s.parked[m.GetExchangeId()] = parkedStream{cancel: cancel, seq: s.parkSeq}
	return nil
}

// parkedStream is one parked standalone stream.
type parkedStream struct {
	cancel context.CancelFunc
	seq    uint64 // parking order
}

// endOldestParked ends the session's longest-parked stream
// (actEndOldestParked, carried out after the new stream was parked: it has
// the highest seq, so it is never the one ended).
func (s *session) endOldestParked() {
	var oldest string
	for id, p := range s.parked {
		if oldest == "" || p.seq < s.parked[oldest].seq {
			oldest = id
		}
	}
	if oldest != "" {
		s.parked[oldest].cancel()
		s.parked = deleteKey(s.parked, oldest)
	}
}

// unpark ends every parked stream (they end cleanly; their Done messages
// remove them from s.parked).
func (s *session) unpark() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// cancelExchanges ends every exchange in flight (runtime disposal).
func (s *session) cancelExchanges() {
	for _, cancel := range s.exchanges {
		cancel()
	}
	s.exchanges = nil
}

// deleteKey deletes k from m and returns m, or nil once m is empty: an
// emptied map keeps its table, and a resident session's maps are empty
// between its requests (most sessions: for their whole life).
func deleteKey[V any](m map[string]V, k string) map[string]V {
	delete(m, k)
	if len(m) == 0 {
		return nil
	}
	return m
}
