// The grain end of an exchange: Start runs the forwarded request's handler
// in its own goroutine and Writer streams the handler's response back as
// frames. The grain keeps handling messages meanwhile.

package exchange

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/dispatch"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Done is sent to the grain (a local message) when an exchange's handler
// returned.
type Done struct {
	// ID is the exchange id.
	ID string
}

// Ack answers an exchange's request with ExchangeStarted. It is called
// once, from any goroutine; first is the response's first frame, or nil.
type Ack func(first *pb.ExchangeFrame)

// AckWith returns the Ack that sends started, carrying the first frame,
// through answer (the function grain.Context.Defer returned).
func AckWith(answer func(proto.Message, error), started *pb.ExchangeStarted) Ack {
	return func(first *pb.ExchangeFrame) {
		started.First = first
		answer(started, nil)
	}
}

// Start validates m and serves it with serve in a new goroutine, with a
// request whose context ends when the returned cancel is called. ctx is
// the grain's turn's (its Receive's): with tracing on, the handler takes
// over the turn's grain.receive span (tracing.TakeReceive) and ends it
// when it returns; ctx's cancellation does not reach the handler. A
// non-empty identity (the caller's, [IdentityValue], set by the grain) is
// the request's [HeaderIdentity], replacing any m carries. When serve
// returns, the response is ended and Done is sent to self.
//
// With a non-nil ack, the caller answers the request later (grain.Context
// Defer) and Start calls ack once: with the first frame if m asks for it in
// the reply (FirstFrameInReply) and the handler produces it within
// ackWindow, else with nil when the window ends. A nil ack means the caller
// answered already; every frame then goes to the reply address.
func Start(ctx context.Context, system *actor.ActorSystem, self *actor.PID, m *pb.HttpExchange, identity string, serve func(http.ResponseWriter, *http.Request), ack Ack) (cancel context.CancelFunc, err error) {
	return start(ctx, system, self, m, identity, serve, ack, ackWindow)
}

// start is Start with the ack window as a parameter (tests set their own).
func start(turn context.Context, system *actor.ActorSystem, self *actor.PID, m *pb.HttpExchange, identity string, serve func(http.ResponseWriter, *http.Request), ack Ack, window time.Duration) (cancel context.CancelFunc, err error) {
	if m.GetReplyAddress() == "" || m.GetReplyId() == "" || m.GetExchangeId() == "" {
		return nil, fmt.Errorf("exchange needs an id and a reply address")
	}
	ctx, stop := context.WithCancel(context.Background())
	ctx, endSpan := serveSpan(turn, ctx, m)
	req, err := request(ctx, m, identity)
	if err != nil {
		stop()
		endSpan()
		return nil, err
	}
	injectSpan(ctx, m, req.Header)
	w := newWriterTo(system, m.GetReplyAddress(), m.GetReplyId(), m.GetExchangeId())
	if ack != nil {
		if !m.GetFirstFrameInReply() {
			ack(nil)
		} else {
			w.ackFirst(ack, window)
		}
	}
	handlers.Schedule(func() {
		defer stop()
		defer endSpan()
		defer func() {
			switch r := recover(); {
			case r != nil:
				w.End(fmt.Sprintf("handler panicked: %v", r))
			case ctx.Err() != nil:
				// Cancelled before it finished on its own: the runtime
				// closed (passivation, drain) or the client left.
				w.End("cancelled before the handler finished")
			default:
				w.End("")
			}
			system.Root.Send(self, &w.done)
		}()
		serve(w, req)
	})
	return stop, nil
}

// handlers runs exchanges' handlers on reused goroutines (package
// dispatch): go-sdk's handler is deep, and a fresh goroutine grew its
// stack by copying on every request.
var handlers = dispatch.NewWarm(256, 0)

// Request rebuilds the forwarded request.
func Request(m *pb.HttpExchange) (*http.Request, error) {
	return request(context.Background(), m, "")
}

// request rebuilds the forwarded request with ctx and a non-empty
// identity (requestHeader). Its URL is m's path and query as they are (a
// URL formatted and parsed again would be the same, at an allocation or
// two per request); its header is filled into the map the request was
// made with when it fits in that map's first table (8 fields), else made
// for its size; its body is one value over m's body ([RequestBody] reads
// it again), with no GetBody closure.
func request(ctx context.Context, m *pb.HttpExchange, identity string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, m.GetMethod(), "", nil)
	if err != nil {
		return nil, fmt.Errorf("bad exchange request: %w", err)
	}
	req.URL.Path, req.URL.RawQuery = m.GetPath(), m.GetRawQuery()
	if req.URL.Path == "" {
		req.URL.Path = "/mcp"
	}
	if n := headerFieldCount(m, identity); n > smallHeader {
		req.Header = make(http.Header, n)
	}
	fillHeader(req.Header, m, identity)
	req.Host = m.GetHost()
	req.Body = http.NoBody
	if b := m.GetBody(); len(b) > 0 {
		rb := &requestBody{data: b}
		rb.Reset(b)
		req.Body = rb
	}
	req.ContentLength = int64(len(m.GetBody()))
	return req, nil
}

// requestBody is a rebuilt request's body: a reader over the exchange's
// body that remembers all of it.
type requestBody struct {
	bytes.Reader
	data []byte
}

// Close implements io.Closer.
func (*requestBody) Close() error { return nil }

// RequestBody is the whole body of a request [Start] or [Request] rebuilt,
// however much of it was read (a request made otherwise: nil, false).
func RequestBody(req *http.Request) ([]byte, bool) {
	if rb, ok := req.Body.(*requestBody); ok {
		return rb.data, true
	}
	return nil, false
}

// requestHeader is the header of m's request, with a non-empty identity
// as its [HeaderIdentity] (replacing m's). The values are copied into one
// slice (m's may be the gateway's own request's: a handler must not write
// into them), each field's clipped so that an Add to it copies.
func requestHeader(m *pb.HttpExchange, identity string) http.Header {
	header := make(http.Header, headerFieldCount(m, identity))
	fillHeader(header, m, identity)
	return header
}

// smallHeader is how many fields a map made without a size holds in its
// first table: a request's header up to this fills the map
// http.NewRequest made (one object: its table; a map made for the size
// was two, and the request's own was dropped).
const smallHeader = 8

// headerFieldCount is how many fields requestHeader(m, identity) has at
// most.
func headerFieldCount(m *pb.HttpExchange, identity string) int {
	if identity != "" {
		return len(m.GetHeaders()) + 1
	}
	return len(m.GetHeaders())
}

// fillHeader adds requestHeader's fields to the empty header.
func fillHeader(header http.Header, m *pb.HttpExchange, identity string) {
	n, extra := 0, 0
	for _, h := range m.GetHeaders() {
		n += len(h.GetValues())
	}
	if identity != "" {
		n, extra = n+1, 1
	}
	values := make([]string, 0, n)
	add := func(k string, vs []string) {
		if len(vs) == 0 {
			return
		}
		start := len(values)
		values = append(values, vs...)
		if old := header[k]; old != nil { // a name twice in m (not after the gateway)
			header[k] = append(old, values[start:]...)
			return
		}
		header[k] = values[start:len(values):len(values)]
	}
	for _, h := range m.GetHeaders() {
		if k := textproto.CanonicalMIMEHeaderKey(h.GetName()); extra == 0 || k != HeaderIdentity {
			add(k, h.GetValues())
		}
	}
	if extra > 0 {
		values = append(values, identity)
		header[HeaderIdentity] = values[len(values)-1:]
	}
}

// Writer is the http.ResponseWriter a tunnelled handler writes to. It
// sends the response as ExchangeFrames: the status and headers travel with
// the first flushed bytes (or the end), so a handler that answers at once
// costs one message.
type Writer struct {
	system *actor.ActorSystem
	to     *actor.PID
	id     string
	// toPID and done are what Start's writer sends to: the reply
	// address, and the Done message for its grain (in the writer's
	// allocation, not two of their own).
	toPID actor.PID
	done  Done

	mu      sync.Mutex
	header  http.Header
	status  int  // set by WriteHeader (or the first Write)
	sent    bool // the head went out
	ended   bool
	buf     bytes.Buffer
	flushed bool // a Flush is waiting for its coalescing window
	// timer is the writer's one timer (fire): it sends a waiting Flush
	// when its coalescing window ends, and calls ack without a frame when
	// the ack window (ackBy) ends first. One timer, not one for each: two
	// allocations and a timer start fewer per exchange.
	timer *time.Timer
	ack   Ack       // takes the first frame instead of the reply address; nil once called
	ackBy time.Time // when ack is called without a frame
}

// coalesceWindow is how long a Flush waits for more of the response before
// its frame goes out. go-sdk flushes after every SSE event: the head with
// the priming event, then the result, then the handler returns. Across
// processes each frame is a remote message; a quick answer now costs one
// (head, events and end together) instead of three. A stream whose next
// event comes later is delayed by at most this.
const coalesceWindow = time.Millisecond

// ackWindow bounds how long the answer to an exchange's request waits for
// the response's first frame to travel with it. go-sdk writes something at
// once for nearly every request (a JSON answer, a 202, an SSE head with its
// priming event), so the wait is normally the coalescing window; a handler
// that stays silent longer gets its acknowledgement alone.
const ackWindow = 5 * time.Millisecond

// firstWriteRoom is the buffer a response's first Write makes: a quick
// answer's priming event and result fit in it.
const firstWriteRoom = 1 << 10

// maxChunk flushes buffered body bytes beyond this size even without an
// explicit Flush.
const maxChunk = 32 << 10

// NewWriter returns a writer streaming to the actor to.
func NewWriter(system *actor.ActorSystem, to *actor.PID, exchangeID string) *Writer {
	return &Writer{system: system, to: to, id: exchangeID, header: http.Header{}}
}

// newWriterTo is NewWriter to the actor address/id, holding its PID and
// its exchange's Done.
func newWriterTo(system *actor.ActorSystem, address, id, exchangeID string) *Writer {
	w := &Writer{system: system, id: exchangeID, header: http.Header{}}
	w.toPID.Address, w.toPID.Id = address, id
	w.to, w.done.ID = &w.toPID, exchangeID
	return w
}

// ackFirst makes the first frame go to ack, if it is ready within window;
// otherwise ack gets nil then, and the frames go to the reply address.
func (w *Writer) ackFirst(ack Ack, window time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ack, w.ackBy = ack, time.Now().Add(window)
	w.armLocked(window)
}

// armLocked makes the writer's timer fire after d (w.mu held).
func (w *Writer) armLocked(d time.Duration) {
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
		return
	}
	w.timer.Reset(d)
}

// fire is the timer's: it sends what a Flush left waiting, unless a later
// send (the end, a full chunk) already took it, and calls a waiting ack
// without a frame once its window ended (else it fires again then).
func (w *Writer) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flushed && !w.ended {
		w.sendLocked(false, "") // the frame goes to a waiting ack
	}
	a := w.ack
	if a == nil {
		return
	}
	if left := time.Until(w.ackBy); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.ack = nil
	a(nil)
}

// Header implements http.ResponseWriter.
func (w *Writer) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter.
func (w *Writer) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 && !w.ended {
		w.status = status
	}
}

// Write implements http.ResponseWriter.
func (w *Writer) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return 0, http.ErrHandlerTimeout
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.buf.Cap() == 0 {
		// Room for a usual answer at once (go-sdk writes an SSE answer
		// in a few pieces: the buffer grew two or three times).
		w.buf.Grow(max(len(b), firstWriteRoom))
	}
	w.buf.Write(b)
	if w.buf.Len() >= maxChunk {
		w.sendLocked(false, "")
	}
	return len(b), nil
}

// Flush implements http.Flusher (go-sdk flushes after every SSE event).
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if (w.buf.Len() > 0 || !w.sent) && !w.flushed {
		w.flushed = true
		w.armLocked(coalesceWindow)
	}
}

func (w *Writer) sendLocked(end bool, errText string) {
	w.flushed = false
	if w.timer != nil && end {
		w.timer.Stop()
	}
	var f *pb.ExchangeFrame
	if !w.sent {
		w.sent = true
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f = headFrameOf(w.header)
		f.Head.Status = int32(w.status)
	} else {
		f = &pb.ExchangeFrame{}
	}
	f.ExchangeId, f.End, f.Error = w.id, end, errText
	if w.buf.Len() > 0 {
		if end {
			// The last frame: nothing writes to the buffer again, so the
			// frame takes its bytes instead of a copy.
			f.Data = w.buf.Bytes()
			w.buf = bytes.Buffer{}
		} else {
			f.Data = append([]byte(nil), w.buf.Bytes()...)
			w.buf.Reset()
		}
	}
	if a := w.ack; a != nil {
		// Under the lock, so no later frame can overtake this one: the
		// gateway relays the reply's frame before any sent to its reply address.
		w.ack = nil
		w.timer.Stop() // nothing left for it: the ack is answered, no Flush waits
		a(f)
		return
	}
	w.system.Root.Send(w.to, f)
}

// headFields is how many header fields (and values) a response's first
// frame holds in its own allocation (headFrame): go-sdk's answers carry
// 3–4 (Content-Type, Cache-Control, Connection, Mcp-Session-Id).
const headFields = 6

// headFrame is a response's first frame with its head and room for its
// header fields: one allocation, not five (frame, head, fields, their
// pointers, their values).
type headFrame struct {
	frame    pb.ExchangeFrame
	head     pb.ExchangeHead
	fields   [headFields]pb.HttpHeader
	pointers [headFields]*pb.HttpHeader
	values   [headFields]string
}

// headFrameOf is a first frame whose head holds a copy of h (the handler
// may go on to change h): in one allocation when h fits in a headFrame,
// else with the fields and their values in their own.
func headFrameOf(h http.Header) *pb.ExchangeFrame {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	hf := &headFrame{}
	f := &hf.frame
	f.Head = &hf.head
	var fields []pb.HttpHeader
	var values []string
	if len(h) <= headFields && n <= headFields {
		fields, values, f.Head.Headers = hf.fields[:len(h)], hf.values[:0], hf.pointers[:0:len(h)]
	} else {
		fields, values, f.Head.Headers = make([]pb.HttpHeader, len(h)), make([]string, 0, n), make([]*pb.HttpHeader, 0, len(h))
	}
	for k, v := range h {
		start := len(values)
		values = append(values, v...)
		hd := &fields[len(f.Head.Headers)]
		hd.Name, hd.Values = k, values[start:len(values):len(values)]
		f.Head.Headers = append(f.Head.Headers, hd)
	}
	return f
}

// End sends what is left and ends the response (once).
func (w *Writer) End(errText string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	w.sendLocked(true, errText)
}
