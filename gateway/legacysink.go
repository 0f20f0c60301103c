package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// sseSink is the http.ResponseWriter of a Streamable HTTP exchange made
// for an HTTP+SSE session: it writes the JSON-RPC messages of the response
// (a JSON body or an SSE stream) to the session's SSE stream as "message"
// events. An error answer of the gateway or the SDK (id null, or not
// JSON-RPC at all) to a request becomes that request's JSON-RPC error, so
// the client is not left waiting.
type sseSink struct {
	out     *sseOut
	reqID   json.RawMessage // the request's id; nil for a notification or response
	header  http.Header
	status  int
	stream  bool
	buf     bytes.Buffer
	data    [][]byte // data lines of the event being read
	started chan struct{}
	once    sync.Once
}

func newSSESink(out *sseOut, reqID json.RawMessage) *sseSink {
	return &sseSink{out: out, reqID: reqID, header: http.Header{}, started: make(chan struct{})}
}

// Header returns the response headers.
func (s *sseSink) Header() http.Header { return s.header }

// WriteHeader records the response's status and kind.
func (s *sseSink) WriteHeader(status int) {
	if s.status != 0 {
		return
	}
	s.status = status
	mt, _, _ := mime.ParseMediaType(s.header.Get("Content-Type"))
	s.stream = mt == "text/event-stream"
	s.once.Do(func() { close(s.started) })
}

// Write takes response bytes; an SSE stream's complete events go out at
// once.
func (s *sseSink) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	s.buf.Write(b)
	if s.stream {
		s.events()
	}
	return len(b), nil
}

// Flush is a no-op: events go out as they complete.
func (s *sseSink) Flush() {}

// events writes the complete events buffered so far.
func (s *sseSink) events() {
	for {
		i := bytes.IndexByte(s.buf.Bytes(), '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSuffix(s.buf.Next(i + 1)[:i], []byte("\r"))
		switch {
		case len(line) == 0:
			// An event without data (the SDK's priming event for
			// resumption) carries no message.
			if d := bytes.Join(s.data, []byte("\n")); len(bytes.TrimSpace(d)) > 0 {
				_ = s.out.event("message", d)
			}
			s.data = nil
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			s.data = append(s.data, bytes.Clone(d))
		}
	}
}

// finish writes what the response left: a JSON body, or an error answer
// turned into the request's JSON-RPC error.
func (s *sseSink) finish() {
	s.once.Do(func() { close(s.started) })
	if s.stream {
		s.events()
		return
	}
	body := bytes.TrimSpace(s.buf.Bytes())
	if s.status == http.StatusAccepted || len(body) == 0 && s.status < 300 {
		return
	}
	if msg, ok := s.answer(body); ok {
		_ = s.out.event("message", msg)
	}
}

// answer is the message a non-stream body becomes, if any.
func (s *sseSink) answer(body []byte) ([]byte, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	isRPC := json.Unmarshal(body, &m) == nil
	if isRPC && s.status < 300 {
		return body, true
	}
	if len(s.reqID) == 0 {
		return nil, false // nobody waits for an answer
	}
	if isRPC && m.Error != nil {
		return exchange.ErrorBody(s.reqID, m.Error.Code, m.Error.Message), true
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = http.StatusText(s.status)
	}
	return exchange.ErrorBody(s.reqID, exchange.CodeInvalidRequest, msg), true
}
