package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// modernVersion is the first sessionless protocol version (SEP-2575).
const modernVersion = "2026-07-28"

// metaProtocolVersion is the per-request _meta key carrying the version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// peeked is the part of a JSON-RPC request the gateway looks at.
type peeked struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta         map[string]any  `json:"_meta"`
		RequestState *string         `json:"requestState"`
		TaskID       json.RawMessage `json:"taskId"`
	} `json:"params"`
}

// taskGrain is the task grain a tasks/* request (MCP tasks extension) goes
// to: the one named by its taskId, wherever the task was created. A
// request without a usable taskId goes to the grain "-", which exists
// for no task and answers why.
func taskGrain(pk peeked) (string, bool) {
	switch pk.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return "", false
	}
	var id string
	if json.Unmarshal(pk.Params.TaskID, &id) != nil || id == "" || len(id) > maxTaskID || strings.ContainsFunc(id, notIDRune) {
		return "-", true
	}
	return id, true
}

// notIDRune reports a rune no task id has: ours are "task-" and hex, so a
// grain identity built from a client's taskId is always plain.
func notIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// maxTaskID bounds the task ids the gateway routes (ours are 37 bytes).
const maxTaskID = 128

func peek(body []byte) (peeked, bool) {
	var p peeked
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return p, false
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, false
	}
	return p, true
}

// isModern reports whether a request speaks the sessionless 2026-07-28 era:
// by its MCP-Protocol-Version header or its per-request _meta version.
func isModern(r *http.Request, body []byte) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= modernVersion
	}
	if p, ok := peek(body); ok {
		if v, _ := p.Params.Meta[metaProtocolVersion].(string); v != "" {
			return v >= modernVersion
		}
	}
	return false
}

// localContinuation picks a continuation grain this node owns, so a fresh
// sessionless request costs no network hop.
func (h *mcpHandler) localContinuation() string {
	start := h.continuationSeq.Add(1)
	return h.ownedID(exchange.KindContinuation, 64, func(i int) string {
		return fmt.Sprintf("c-%s-%d", h.node.ID(), (start+uint64(i))%64)
	})
}

// modern serves a 2026-07-28 request: POST only; a retry carrying our
// requestState goes to the grain that issued it, anything else to a local
// continuation grain.
func (h *mcpHandler) modern(w http.ResponseWriter, r *http.Request, p *pb.Principal, body []byte) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		exchange.WriteError(w, http.StatusMethodNotAllowed, nil, exchange.CodeServerError, "Method not allowed: protocol version "+modernVersion+" is sessionless (POST only)")
		return
	}
	pk, _ := peek(body)
	if id, ok := taskGrain(pk); ok {
		h.fwd.Forward(w, r, exchange.Target{Kind: exchange.KindTask, ID: id, Principal: p, Body: body})
		return
	}
	owner := ""
	if st := pk.Params.RequestState; st != nil && *st != "" {
		claims, err := requeststate.Verify(h.o.StateKey, *st, time.Now())
		if err != nil || claims.User != p.GetUser() || claims.Org != p.GetOrg() {
			// Same answer for forged, expired and foreign states: nothing
			// about the token's owner leaks.
			exchange.WriteError(w, http.StatusBadRequest, pk.ID, exchange.CodeInvalidParams, "invalid requestState")
			return
		}
		owner = claims.Owner
	}
	if owner == "" {
		owner = h.localContinuation()
	}
	h.fwd.Forward(w, r, exchange.Target{Kind: exchange.KindContinuation, ID: owner, Principal: p, Body: body})
}
