package exchange

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Headers a grain adds to a tunnelled request so handlers inside it (tool
// handlers, middlewares) know the caller. The gateway never forwards client
// headers with these names, so a client cannot set them.
const (
	HeaderUser        = "X-Mcpgrain-User"
	HeaderOrg         = "X-Mcpgrain-Org"
	HeaderRole        = "X-Mcpgrain-Role"
	HeaderMode        = "X-Mcpgrain-Elicitation-Mode"
	HeaderSessionless = "X-Mcpgrain-Sessionless"
	HeaderOrigin      = "X-Mcpgrain-Origin"
	HeaderSession     = "X-Mcpgrain-Session"
)

// HeaderRestored is set on the response to a request that restored its
// session's runtime (a cold restore after passivation or a move), so a
// client — mcpgrain bench's scale scenario — can tell warm answers from
// cold ones. It tells the caller only about its own session.
const HeaderRestored = "Mcpgrain-Restored"

var b64 = base64.RawURLEncoding

// Identity returns the headers describing m's caller, its elicitation mode
// (?elicitation_mode=), its public origin, and the grain serving it.
func Identity(m *pb.HttpExchange, grainID string, sessionless bool) http.Header {
	// One array holds every value (each field's clipped), the names are
	// canonical already: a handful of allocations fewer per request.
	vals := make([]string, 7)
	h := make(http.Header, 7)
	set := func(i int, k, v string) {
		vals[i] = v
		h[k] = vals[i : i+1 : i+1]
	}
	p := m.GetPrincipal()
	set(0, HeaderUser, b64.EncodeToString([]byte(p.GetUser())))
	set(1, HeaderOrg, b64.EncodeToString([]byte(p.GetOrg())))
	set(2, HeaderRole, b64.EncodeToString([]byte(p.GetRole())))
	set(3, HeaderOrigin, "http://"+m.GetHost())
	set(4, HeaderSession, grainID)
	if m.GetRawQuery() != "" {
		if q, err := url.ParseQuery(m.GetRawQuery()); err == nil {
			if mode := q.Get("elicitation_mode"); mode != "" {
				set(5, HeaderMode, mode)
			}
		}
	}
	if sessionless {
		set(6, HeaderSessionless, "1")
	}
	return h
}

// PrincipalOf reads the caller from headers set by [Identity].
func PrincipalOf(h http.Header) *pb.Principal {
	dec := func(k string) string {
		b, _ := b64.DecodeString(h.Get(k))
		return string(b)
	}
	return &pb.Principal{User: dec(HeaderUser), Org: dec(HeaderOrg), Role: dec(HeaderRole)}
}

// ApprovalURL is the approval page of execution id: at publicURL when one
// is configured, else at the origin the request came in on (h's
// [HeaderOrigin]; h may be nil).
func ApprovalURL(publicURL string, h http.Header, id string) string {
	origin := publicURL
	if origin == "" && h != nil {
		origin = h.Get(HeaderOrigin)
	}
	return strings.TrimRight(origin, "/") + "/approve/" + id
}
