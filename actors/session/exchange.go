package session

import (
	"context"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/tunnel"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// stateMsg carries new runtime state from the runtime to the grain.
type stateMsg struct {
	h     *hooks
	state []byte
}

func (h *hooks) StateChanged(state []byte) {
	select {
	case <-h.closed:
		return
	default:
	}
	h.system.Root.Send(h.self, &stateMsg{h: h, state: append([]byte(nil), state...)})
}

// exchange starts serving one tunnelled HTTP exchange: it checks the
// principal (creating the session for an initialize without session id),
// makes sure the runtime is resident, and runs go-sdk's handler in its own
// goroutine, streaming the response to the gateway's reply actor. The grain
// goes on handling messages meanwhile.
func (s *session) exchange(ctx context.Context, g grain.Context, m *pb.HttpExchange) (proto.Message, error) {
	started := func(st pb.SessionReply_Status) *pb.ExchangeStarted {
		return &pb.ExchangeStarted{Status: st, Node: g.Node(), GrainAddress: g.Self().GetAddress(), GrainId: g.Self().GetId()}
	}
	if m.GetCreate() {
		if s.rec != nil {
			return started(pb.SessionReply_STATUS_EXISTS), nil
		}
		if _, err := s.create(ctx, g, &pb.SessionCreate{Principal: m.GetPrincipal()}); err != nil {
			return nil, err
		}
	} else {
		if st := s.check(m.GetPrincipal()); st != pb.SessionReply_STATUS_OK {
			return started(st), nil
		}
		if _, err := s.ensureRuntime(ctx, g); err != nil {
			return nil, err
		}
	}
	es, ok := s.rt.(ExchangeServer)
	if !ok {
		return nil, grain.Reject("session: this node's runtime does not serve HTTP exchanges")
	}
	serve := es.ServeExchange
	if m.GetMethod() == http.MethodPost {
		res := s.res
		res.posts.Add(1) // in this turn: whatever the grain decides next sees it
		serve = func(w http.ResponseWriter, r *http.Request) {
			defer res.posts.Add(-1)
			es.ServeExchange(w, r)
		}
	}
	cancel, err := tunnel.Start(g.ActorSystem(), g.Self(), m, tunnel.Identity(m, s.id, false), serve)
	if err != nil {
		if m.GetMethod() == http.MethodPost {
			s.res.posts.Add(-1)
		}
		return nil, grain.Reject("session: %v", err)
	}
	s.markActivity()
	s.exchanges[m.GetExchangeId()] = cancel
	return started(pb.SessionReply_STATUS_OK), nil
}

// cancelExchanges ends every exchange in flight (runtime disposal).
func (s *session) cancelExchanges() {
	for id, cancel := range s.exchanges {
		cancel()
		delete(s.exchanges, id)
	}
}
