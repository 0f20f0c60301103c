package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// rawClient speaks just enough Streamable HTTP to create and revisit
// sessions with plain net/http: one POST per JSON-RPC message, the whole
// response read (JSON or SSE), no session object, no goroutine and no
// buffers kept per session. The scale scenario drives it so that at
// 100,000 sessions the client's own cost stays small next to the
// server's. It does not open the standalone GET stream, resume streams or
// answer server requests.
type rawClient struct {
	hc *http.Client
	// ids numbers JSON-RPC requests across all sessions: two workers may
	// revisit one session at the same time. An initialize is request
	// [initializeID] (a session's first: each of a fleet's clients counts
	// its own requests).
	ids atomic.Int64
}

// initializeID is the JSON-RPC id of a session's initialize, as a client's
// first request (go-sdk's client numbers from 1). A server sees the id of
// every client's initialize alike, not a fleet-wide count; mcpgrain keeps
// one copy of an initialize answer for all sessions that got the same.
const initializeID = 1

// rawSession is a created session: its id and the protocol version it
// negotiated (the constant protocolVersion, shared, in the usual case).
type rawSession struct {
	id, version string
}

// Revisit is what the scale scenario sends to revisit a session.
type Revisit string

const (
	// RevisitEcho is a tools/call of the demo pack's echo tool.
	RevisitEcho Revisit = "echo"
	// RevisitPing is a JSON-RPC ping.
	RevisitPing Revisit = "ping"
)

// answerLimit bounds how much of a response the client reads.
const answerLimit = 1 << 20

// create initializes a session at endpoint: initialize (the answer may be
// JSON or SSE; its Mcp-Session-Id header names the session), then
// notifications/initialized (202). cold reports that the notification
// had to restore the session, passivated in between.
func (c *rawClient) create(ctx context.Context, endpoint string) (s rawSession, cold bool, err error) {
	const step = "initialize"
	const id = initializeID
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpgrain-bench","version":%q}}}`,
		id, protocolVersion, app.Version())
	h, ct, answer, err := c.post(ctx, step, endpoint, rawSession{}, body, http.StatusOK)
	if err != nil {
		return rawSession{}, false, err
	}
	sid := h.Get("Mcp-Session-Id")
	if sid == "" {
		return rawSession{}, false, failure(step+": no session id", "initialize: the answer has no Mcp-Session-Id header")
	}
	result, err := ParseAnswer(ct, answer, id)
	if err != nil {
		return rawSession{}, false, stepFailure(step, err)
	}
	version, err := negotiatedVersion(result)
	if err != nil {
		return rawSession{}, false, stepFailure(step, err)
	}
	s = rawSession{id: sid, version: version}
	h, _, _, err = c.post(ctx, "notifications/initialized", endpoint, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted)
	if err != nil {
		return rawSession{}, false, err
	}
	return s, Restored(h), nil
}

// revisit sends one request of kind what to session s at endpoint and
// reports whether the answer was a cold restore ([Restored]).
func (c *rawClient) revisit(ctx context.Context, endpoint string, s rawSession, what Revisit) (cold bool, err error) {
	id := c.ids.Add(1)
	step, body := "ping", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id)
	if what == RevisitEcho {
		step, body = "tools/call", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`, id)
	}
	h, ct, answer, err := c.post(ctx, step, endpoint, s, body, http.StatusOK)
	if err != nil {
		return false, err
	}
	result, err := ParseAnswer(ct, answer, id)
	if err != nil {
		return false, stepFailure(step, err)
	}
	if what == RevisitEcho {
		var r struct {
			IsError bool `json:"isError"`
		}
		if err := json.Unmarshal(result, &r); err != nil {
			return false, failure(step+": bad response", "tools/call: result: %v", err)
		}
		if r.IsError {
			return false, failure(step+": tool error", "tools/call echo: tool error: %s", snippet(result))
		}
	}
	return Restored(h), nil
}

// Restored reports whether an answer's header says the request restored
// its session's runtime (a cold restore): mcpgrain sets
// [exchange.HeaderRestored] to "1" then. Without it the answer was warm.
func Restored(h http.Header) bool { return h.Get(exchange.HeaderRestored) == "1" }

// post sends one JSON-RPC message of step to endpoint (in session s, if
// it has an id) and reads the whole answer, which must have status want.
func (c *rawClient) post(ctx context.Context, step, endpoint string, s rawSession, body string, want int) (http.Header, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, "", nil, failure(step+": bad request", "%s: %v", step, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, "", nil, stepFailure(step, err)
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, answerLimit))
	resp.Body.Close()
	if err != nil {
		return nil, "", nil, stepFailure(step, err)
	}
	if resp.StatusCode != want {
		return nil, "", nil, failure(fmt.Sprintf("%s: HTTP %d", step, resp.StatusCode), "%s: HTTP %d: %s", step, resp.StatusCode, snippet(answer))
	}
	return resp.Header, resp.Header.Get("Content-Type"), answer, nil
}

// kindError is a failed request and the kind it is counted under in a
// report's errors by kind.
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func failure(kind, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// stepFailure names the kind of err, which happened during step: a
// timeout, a connection failure, a JSON-RPC error answer or a response
// the client could not use.
func stepFailure(step string, err error) error {
	var rpc *rpcError
	var ne net.Error
	kind := "other"
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "timeout"
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.As(err, &rpc):
		kind = fmt.Sprintf("JSON-RPC error %d", rpc.Code)
	case errors.Is(err, errBadAnswer):
		kind = "bad response"
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		kind = "connection"
	}
	return &kindError{kind: step + ": " + kind, err: fmt.Errorf("%s: %w", step, err)}
}

// ErrorKind is the kind err is counted under in the scale scenario's
// errors by kind: the step that failed and how, e.g. "initialize: HTTP
// 503", "tools/call: timeout", "notifications/initialized: connection"
// or "tools/call: JSON-RPC error -32602". Errors from elsewhere are
// "other".
func ErrorKind(err error) string {
	if ke, ok := errors.AsType[*kindError](err); ok {
		return ke.kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "other"
}

// errBadAnswer marks a response body that holds no usable answer.
var errBadAnswer = errors.New("bad response")

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// ParseAnswer finds the JSON-RPC response to request id in an HTTP
// response body with the given Content-Type: one JSON message
// (application/json) or a stream of server-sent events
// (text/event-stream) whose data are messages. Other messages on a
// stream — notifications, requests, a priming event without data — are
// skipped. It returns the response's result, the JSON-RPC error the
// server answered, or an error wrapping errBadAnswer when the body holds
// no response to id.
func ParseAnswer(contentType string, body []byte, id int64) (json.RawMessage, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Type %q", errBadAnswer, contentType)
	}
	var messages [][]byte
	switch mt {
	case "application/json":
		messages = [][]byte{body}
	case "text/event-stream":
		messages = SSEData(body)
	default:
		return nil, fmt.Errorf("%w: Content-Type %q", errBadAnswer, contentType)
	}
	want := strconv.FormatInt(id, 10)
	for _, m := range messages {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(m, &msg); err != nil {
			return nil, fmt.Errorf("%w: %v in %s", errBadAnswer, err, snippet(m))
		}
		if string(bytes.TrimSpace(msg.ID)) != want {
			continue
		}
		if msg.Error != nil {
			return nil, msg.Error
		}
		if len(msg.Result) == 0 {
			return nil, fmt.Errorf("%w: response %s has neither result nor error", errBadAnswer, want)
		}
		return msg.Result, nil
	}
	return nil, fmt.Errorf("%w: no response to request %s in %s", errBadAnswer, want, snippet(body))
}

// SSEData returns the data of each event in an SSE stream, in order:
// the event's data lines joined by "\n". Events without data (a priming
// event carries only an id) are left out; comments and other fields are
// ignored; lines may end in "\n" or "\r\n"; an event cut off by the end
// of the stream still counts.
func SSEData(stream []byte) [][]byte {
	var out [][]byte
	var data []byte
	has := false
	dispatch := func() {
		if has && len(data) > 0 {
			out = append(out, data)
		}
		data, has = nil, false
	}
	for len(stream) > 0 {
		var line []byte
		line, stream, _ = bytes.Cut(stream, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			dispatch()
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // a comment (": …"), id, event or retry
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
	}
	dispatch()
	return out
}

// negotiatedVersion reads protocolVersion from an initialize result.
func negotiatedVersion(result json.RawMessage) (string, error) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(result, &r); err != nil || r.ProtocolVersion == "" {
		return "", fmt.Errorf("%w: initialize result without protocolVersion: %s", errBadAnswer, snippet(result))
	}
	if r.ProtocolVersion == protocolVersion {
		return protocolVersion, nil // shared, not one string per session
	}
	return r.ProtocolVersion, nil
}

// snippet is the start of b on one line, for error messages.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
