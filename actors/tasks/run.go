package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// protocolVersion is the protocol era tasks run in.
const protocolVersion = "2026-07-28"

// outcome is what one run of a task's tool came to: a result, input
// requests for the client (with the tool's state for the next round), or
// a protocol error.
type outcome struct {
	result        json.RawMessage
	inputRequests json.RawMessage
	requestState  string
	err           *rpcError
}

// runner runs tools for the task grains of a node, on one server of the
// node's tool packs (built at the first run) without the task middleware:
// there, every tool answers in its request.
type runner struct {
	newServer func() (*mcp.Server, func(), error)

	// mu guards the lazily built server against close (a node stopping
	// while a first run starts).
	mu      sync.Mutex
	handler http.Handler
	stop    func()
	closed  bool

	annOnce sync.Once
	safe    map[string]bool // tools safe to run again (restartable)
}

// init builds the runner's server at the first run, and returns its
// handler.
func (r *runner) init() (http.Handler, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("tasks: the node is stopping")
	}
	if r.handler != nil {
		return r.handler, nil
	}
	srv, stop, err := r.newServer()
	if err != nil {
		return nil, fmt.Errorf("tasks: build the runner's server: %w", err)
	}
	r.stop = stop
	r.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, DisableLocalhostProtection: true, MaxRequestBodyBytes: -1,
	})
	return r.handler, nil
}

// restartable reports whether tool says running it again is safe: its
// annotations mark it read-only or idempotent (asked of the runner's
// server once, with tools/list).
func (r *runner) restartable(tool string) bool {
	r.annOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.safe = r.listSafe(ctx)
	})
	return r.safe[tool]
}

// listSafe lists the tools whose annotations mark them read-only or
// idempotent.
func (r *runner) listSafe(ctx context.Context) map[string]bool {
	safe := map[string]bool{}
	handler, err := r.init()
	if err != nil {
		return safe
	}
	cursor := ""
	for range 100 { // pages
		params := map[string]any{"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    protocolVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcpgrain-tasks", "version": "1"},
		}}
		if cursor != "" {
			params["cursor"] = cursor
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
		if err != nil {
			return safe
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", protocolVersion)
		req.Header.Set("Mcp-Method", "tools/list")
		w := &buffer{header: http.Header{}}
		handler.ServeHTTP(w, req)
		var page struct {
			Result struct {
				Tools []struct {
					Name        string `json:"name"`
					Annotations struct {
						ReadOnly   bool `json:"readOnlyHint"`
						Idempotent bool `json:"idempotentHint"`
					} `json:"annotations"`
				} `json:"tools"`
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		if json.Unmarshal(w.body.Bytes(), &page) != nil {
			return safe
		}
		for _, t := range page.Result.Tools {
			safe[t.Name] = t.Annotations.ReadOnly || t.Annotations.Idempotent
		}
		if cursor = page.Result.NextCursor; cursor == "" {
			return safe
		}
	}
	return safe
}

// toolOf is the tool name of tools/call params.
func toolOf(params string) string {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal([]byte(params), &p)
	return p.Name
}

// close stops the runner's server; a later run fails.
func (r *runner) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.stop != nil {
		r.stop()
	}
}

// run calls the tool of params (a tools/call params object) for p, with
// the task's inputResponses and requestState for a later round; ctx ends
// the call.
func (r *runner) run(ctx context.Context, p *pb.Principal, taskID string, params json.RawMessage, responses json.RawMessage, state string) outcome {
	handler, err := r.init()
	if err != nil {
		return outcome{err: &rpcError{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	body, name, err := callBody(params, responses, state)
	if err != nil {
		return outcome{err: &rpcError{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
	if err != nil {
		return outcome{err: &rpcError{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	for k, v := range exchange.Identity(&pb.HttpExchange{Principal: p}, taskID, true) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	injectRun(ctx, req.Header)
	w := &buffer{header: http.Header{}}
	handler.ServeHTTP(w, req)
	return parseOutcome(w.status, w.body.Bytes())
}

// callBody is the tools/call request of a task's round: its params with
// the round's inputResponses and requestState, and the protocol _meta
// every 2026-07-28 request carries.
func callBody(params, responses json.RawMessage, state string) ([]byte, string, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, "", fmt.Errorf("tasks: stored params: %w", err)
	}
	var name string
	_ = json.Unmarshal(p["name"], &name)
	delete(p, "inputResponses")
	delete(p, "requestState")
	if len(responses) > 0 {
		p["inputResponses"] = responses
	}
	if state != "" {
		p["requestState"], _ = json.Marshal(state)
	}
	var meta map[string]any
	_ = json.Unmarshal(p["_meta"], &meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = protocolVersion
	if _, ok := meta[metaCapabilities]; !ok {
		meta[metaCapabilities] = map[string]any{}
	}
	if _, ok := meta["io.modelcontextprotocol/clientInfo"]; !ok {
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "mcpgrain-tasks", "version": "1"}
	}
	p["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": p})
	return b, name, err
}

// parseOutcome reads the runner's HTTP answer (JSON, or an SSE stream
// whose last message is the answer).
func parseOutcome(status int, body []byte) outcome {
	msg := bytes.TrimSpace(body)
	if bytes.HasPrefix(msg, []byte("event:")) || bytes.HasPrefix(msg, []byte("data:")) || bytes.HasPrefix(msg, []byte("id:")) {
		msg = lastSSEData(msg)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil || (resp.Error == nil && len(resp.Result) == 0) {
		return outcome{err: &rpcError{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("tasks: the tool's server answered HTTP %d: %.200s", status, body)}}
	}
	if resp.Error != nil {
		return outcome{err: resp.Error}
	}
	var res struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  string          `json:"requestState"`
	}
	_ = json.Unmarshal(resp.Result, &res)
	if res.ResultType == "input_required" || (len(res.InputRequests) > 0 && string(res.InputRequests) != "null") {
		return outcome{inputRequests: res.InputRequests, requestState: res.RequestState}
	}
	return outcome{result: resp.Result}
}

// lastSSEData is the data of the last SSE event in b.
func lastSSEData(b []byte) []byte {
	var last []byte
	for line := range strings.SplitSeq(string(b), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
			last = []byte(strings.TrimSpace(d))
		}
	}
	return last
}

// buffer is an in-memory http.ResponseWriter.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffer) Header() http.Header { return b.header }
func (b *buffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *buffer) Flush() {}
