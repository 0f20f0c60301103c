package session

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// exchangeDone tells the grain an exchange's handler returned.
type exchangeDone struct {
	id string
}

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
	if m.GetReplyAddress() == "" || m.GetReplyId() == "" || m.GetExchangeId() == "" {
		return nil, grain.Reject("session: exchange needs an id and a reply actor")
	}
	req, err := newRequest(m)
	if err != nil {
		return nil, grain.Reject("session: %v", err)
	}
	s.markActivity()
	xctx, cancel := context.WithCancel(context.Background())
	s.exchanges[m.GetExchangeId()] = cancel
	w := &streamWriter{system: g.ActorSystem(), to: actor.NewPID(m.GetReplyAddress(), m.GetReplyId()), id: m.GetExchangeId(), header: http.Header{}}
	self, root, id := g.Self(), g.ActorSystem().Root, m.GetExchangeId()
	go func() {
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				w.end(fmt.Sprintf("handler panicked: %v", r))
			} else {
				w.end("")
			}
			root.Send(self, &exchangeDone{id: id})
		}()
		es.ServeExchange(w, req.WithContext(xctx))
	}()
	return started(pb.SessionReply_STATUS_OK), nil
}

func newRequest(m *pb.HttpExchange) (*http.Request, error) {
	u := &url.URL{Path: m.GetPath(), RawQuery: m.GetRawQuery()}
	if u.Path == "" {
		u.Path = "/mcp"
	}
	req, err := http.NewRequest(m.GetMethod(), u.String(), bytes.NewReader(m.GetBody()))
	if err != nil {
		return nil, fmt.Errorf("bad exchange request: %w", err)
	}
	for _, h := range m.GetHeaders() {
		for _, v := range h.GetValues() {
			req.Header.Add(h.GetName(), v)
		}
	}
	req.Host = m.GetHost()
	req.ContentLength = int64(len(m.GetBody()))
	return req, nil
}

// cancelExchanges ends every exchange in flight (runtime disposal).
func (s *session) cancelExchanges() {
	for id, cancel := range s.exchanges {
		cancel()
		delete(s.exchanges, id)
	}
}

// streamWriter is the http.ResponseWriter go-sdk writes the response to:
// it forwards the status and headers once, then every flushed chunk, to
// the gateway's reply actor, in order.
type streamWriter struct {
	system *actor.ActorSystem
	to     *actor.PID
	id     string

	mu     sync.Mutex
	header http.Header
	head   bool
	ended  bool
	buf    bytes.Buffer
}

const maxChunk = 32 << 10

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(status)
}

func (w *streamWriter) writeHeaderLocked(status int) {
	if w.head || w.ended {
		return
	}
	w.head = true
	hs := make([]*pb.HttpHeader, 0, len(w.header))
	for k, v := range w.header {
		hs = append(hs, &pb.HttpHeader{Name: k, Values: append([]string(nil), v...)})
	}
	w.system.Root.Send(w.to, &pb.ExchangeHead{ExchangeId: w.id, Status: int32(status), Headers: hs})
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return 0, http.ErrHandlerTimeout
	}
	w.writeHeaderLocked(http.StatusOK)
	w.buf.Write(b)
	if w.buf.Len() >= maxChunk {
		w.flushLocked()
	}
	return len(b), nil
}

// Flush implements http.Flusher (go-sdk flushes after every SSE event).
func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.writeHeaderLocked(http.StatusOK)
	w.flushLocked()
}

func (w *streamWriter) flushLocked() {
	if w.buf.Len() == 0 {
		return
	}
	data := append([]byte(nil), w.buf.Bytes()...)
	w.buf.Reset()
	w.system.Root.Send(w.to, &pb.ExchangeChunk{ExchangeId: w.id, Data: data})
}

func (w *streamWriter) end(errText string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.writeHeaderLocked(http.StatusOK)
	w.flushLocked()
	w.ended = true
	w.system.Root.Send(w.to, &pb.ExchangeEnd{ExchangeId: w.id, Error: errText})
}
