package exchange

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes mcpgrain answers with outside go-sdk's server (the
// standard ones are go-sdk's [jsonrpc] constants).
const (
	// CodeServerError is -32001, the implementation-defined server error of
	// the MCP reference servers: unauthorized, session not found, session
	// restarting (the restart envelope).
	CodeServerError = -32001
	// CodeForbidden is -32003: the session belongs to another principal,
	// or (tasks/update) the caller's role may not decide a paused
	// execution.
	CodeForbidden = -32003
	// CodeInvalidRequest is JSON-RPC's -32600.
	CodeInvalidRequest = jsonrpc.CodeInvalidRequest
	// CodeParseError is JSON-RPC's -32700.
	CodeParseError = jsonrpc.CodeParseError
	// CodeInvalidParams is JSON-RPC's -32602 (a bad requestState).
	CodeInvalidParams = jsonrpc.CodeInvalidParams
	// CodeUnsupportedProtocolVersion is MCP's -32022 (SEP-2575), with
	// data {supported, requested}.
	CodeUnsupportedProtocolVersion = mcp.CodeUnsupportedProtocolVersion
)

// MessageRestarting is the restart envelope's message: the session is
// being restored or moved; the client should retry.
const MessageRestarting = "MCP session is restarting, please retry"

// errorResponse is a JSON-RPC error response.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   errorObject     `json:"error"`
}

type errorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ErrorBody is the JSON-RPC error response answering the request with id
// (null when id is empty: a request the server could not identify).
func ErrorBody(id json.RawMessage, code int, msg string) []byte {
	return errorBody(id, errorObject{Code: code, Message: msg})
}

// ErrorBodyData is ErrorBody with the error's data member (omitted when
// nil).
func ErrorBodyData(id json.RawMessage, code int, msg string, data any) []byte {
	return errorBody(id, errorObject{Code: code, Message: msg, Data: data})
}

func errorBody(id json.RawMessage, e errorObject) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(errorResponse{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil { // id was not valid JSON: answer as for an unknown id
		b, _ = json.Marshal(errorResponse{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: e})
	}
	return b
}

// WriteError writes a JSON-RPC error response with HTTP status: the answer
// to the request with id (nil: id null).
func WriteError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(ErrorBody(id, code, msg), '\n'))
}

// WriteErrorData is WriteError with the error's data member.
func WriteErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(ErrorBodyData(id, code, msg, data), '\n'))
}

// WriteRestarting writes the restart envelope (HTTP 503, Retry-After,
// JSON-RPC error -32001) answering the request with id (nil: null): the
// session is being restored or moved and could not answer this request;
// the client should retry. The session lives on.
func WriteRestarting(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Retry-After", "2")
	WriteError(w, http.StatusServiceUnavailable, id, CodeServerError, MessageRestarting)
}

// RestartingEvent is the SSE event answering the request with reqID with
// the restart envelope's retryable JSON-RPC error: how a response stream
// that broke before its response ends.
func RestartingEvent(reqID json.RawMessage) []byte {
	return fmt.Appendf(nil, "event: message\ndata: %s\n\n", ErrorBody(reqID, CodeServerError, MessageRestarting))
}

// WriteLostStream answers a resumed stream whose response cannot be
// replayed: a stream holding only the retryable error for reqID.
func WriteLostStream(w http.ResponseWriter, reqID json.RawMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(RestartingEvent(reqID))
	_ = http.NewResponseController(w).Flush()
}
