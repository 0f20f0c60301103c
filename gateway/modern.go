package gateway

import (
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

// taskGrain is the task grain a tasks/* request (MCP tasks extension) goes
// to: the one named by its taskId, wherever the task was created. A
// request without a usable taskId goes to the grain "-", which exists
// for no task and answers why.
func taskGrain(body rpcBody) (string, bool) {
	switch body.method() {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return "", false
	}
	var id string
	if json.Unmarshal(body.pk.Params.TaskID, &id) != nil || id == "" || len(id) > maxTaskID || strings.ContainsFunc(id, notIDRune) {
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

// isModern reports whether a request speaks the sessionless 2026-07-28 era:
// by its MCP-Protocol-Version header or its per-request _meta version.
func isModern(r *http.Request, body rpcBody) bool {
	if v := exchange.HeaderValue(r.Header, "Mcp-Protocol-Version"); v != "" {
		return v >= modernVersion
	}
	if v := body.metaVersion(); v != "" {
		return v >= modernVersion
	}
	return false
}

// localContinuation picks a continuation grain this node owns, so a fresh
// sessionless request costs no network hop.
func (h *mcpHandler) localContinuation() string {
	start := h.continuationSeq.Add(1)
	return h.ownedID(exchange.KindContinuation, 64, func(i int) string {
		return fmt.Sprintf("%s%s-%d", exchange.ContinuationIDPrefix, h.node.ID(), (start+uint64(i))%64)
	})
}

// modern serves a 2026-07-28 request: POST only; a retry carrying our
// requestState goes to the grain that issued it, anything else to a local
// continuation grain.
func (h *mcpHandler) modern(w http.ResponseWriter, r *http.Request, p *pb.Principal, body rpcBody) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		exchange.WriteError(w, http.StatusMethodNotAllowed, nil, exchange.CodeServerError, "Method not allowed: protocol version "+modernVersion+" is sessionless (POST only)")
		return
	}
	if id, ok := taskGrain(body); ok {
		h.fwd.Forward(w, r, body.target(exchange.KindTask, id, p))
		return
	}
	owner := ""
	if st := body.pk.Params.RequestState; st != nil && *st != "" {
		claims, err := requeststate.Verify(h.o.StateKey, *st, time.Now())
		if err != nil || claims.User != p.GetUser() || claims.Org != p.GetOrg() {
			// Same answer for forged, expired and foreign states: nothing
			// about the token's owner leaks.
			exchange.WriteError(w, http.StatusBadRequest, body.requestID(), exchange.CodeInvalidParams, "invalid requestState")
			return
		}
		owner = claims.Owner
	}
	if owner == "" {
		owner = h.localContinuation()
	}
	h.fwd.Forward(w, r, body.target(exchange.KindContinuation, owner, p))
}
