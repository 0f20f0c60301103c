package mcpruntime

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// sdkNotHandled begins the text go-sdk's streamable handler answers, as a
// plain-text 400, to a request for a method its server does not receive
// (jsonrpc2.ErrNotHandled, checked before dispatch: "JSON RPC not handled:
// \"nope/nope\" unsupported"). For protocol versions before 2026-07-28
// that is its answer in a stateful session; from 2026-07-28 on it answers
// JSON-RPC -32601 itself.
const sdkNotHandled = "JSON RPC not handled"

// maxHeldRefusal bounds the plain-text refusal held back to be rewritten
// (go-sdk's is one line).
const maxHeldRefusal = 4 << 10

// methodNotFound is JSON-RPC's answer to a call of a method the session's
// server does not have, in place of go-sdk's plain-text 400: HTTP 200 with
// the error -32601 for the call's id, as the MCP reference servers (and
// go-sdk's own JSON-RPC connections) answer. A client then gets "method not
// found" for that call and its session lives on: go-sdk's client takes a
// 4xx without a JSON-RPC body as the end of its connection. ok is false
// when refusal is another of go-sdk's refusals or body is not one call (a
// notification, a batch): those keep go-sdk's answer.
func methodNotFound(refusal, body []byte) (answer []byte, ok bool) {
	if !bytes.HasPrefix(refusal, []byte(sdkNotHandled)) {
		return nil, false
	}
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(body, &call) != nil || call.Method == nil || len(call.ID) == 0 || string(call.ID) == "null" {
		return nil, false
	}
	return exchange.ErrorBody(call.ID, jsonrpc.CodeMethodNotFound, "Method not found: "+*call.Method), true
}

// refusalWriter holds back go-sdk's plain-text 400 to a POST, so that
// finish can answer an unknown method with JSON-RPC's error instead
// (methodNotFound). Every other response passes through as written.
type refusalWriter struct {
	http.ResponseWriter
	held bool // a plain-text 400 is held back in buf
	buf  bytes.Buffer
}

func (u *refusalWriter) WriteHeader(status int) {
	if status == http.StatusBadRequest && strings.HasPrefix(u.Header().Get("Content-Type"), "text/plain") {
		u.held = true
		return
	}
	u.ResponseWriter.WriteHeader(status)
}

func (u *refusalWriter) Write(p []byte) (int, error) {
	if u.held {
		if u.buf.Len() < maxHeldRefusal {
			u.buf.Write(p[:min(len(p), maxHeldRefusal-u.buf.Len())])
		}
		return len(p), nil
	}
	return u.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer beneath (Flush).
func (u *refusalWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Flush implements http.Flusher.
func (u *refusalWriter) Flush() {
	if f, ok := u.ResponseWriter.(http.Flusher); ok && !u.held {
		f.Flush()
	}
}

// finish writes the held refusal once go-sdk's handler returned: the
// JSON-RPC answer of an unknown method (the request body read again:
// requestBody), or the refusal as go-sdk wrote it.
func (u *refusalWriter) finish(req *http.Request) {
	if !u.held {
		return
	}
	if body, ok := requestBody(req); ok {
		if answer, ok := methodNotFound(u.buf.Bytes(), body); ok {
			h := u.Header()
			h.Del("X-Content-Type-Options")
			h.Set("Content-Type", "application/json")
			u.ResponseWriter.WriteHeader(http.StatusOK)
			_, _ = u.ResponseWriter.Write(append(answer, '\n'))
			return
		}
	}
	u.ResponseWriter.WriteHeader(http.StatusBadRequest)
	_, _ = u.ResponseWriter.Write(u.buf.Bytes())
}

// requestBody is req's whole body, read again: the exchange's (a request
// exchange.Start rebuilt), or by req.GetBody (one made otherwise).
func requestBody(req *http.Request) ([]byte, bool) {
	if body, ok := exchange.RequestBody(req); ok {
		return body, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	defer func() { _ = rc.Close() }()
	body, err := io.ReadAll(rc)
	return body, err == nil
}
