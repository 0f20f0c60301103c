package exchange

import (
	"encoding/json"
	"net/http"
)

// The restart envelope's JSON-RPC error: the session is being restored or
// moved; the client should retry.
const (
	CodeRestarting    = -32001
	MessageRestarting = "MCP session is restarting, please retry"
)

// WriteRestarting writes the seed's restart envelope (HTTP 503, Retry-After,
// JSON-RPC error -32001): the session is being restored or moved and could
// not answer this request; the client should retry. The session lives on.
func WriteRestarting(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "2")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": CodeRestarting, "message": MessageRestarting},
	})
}
