package exchange

import (
	"encoding/base64"
	"net/http"
	"net/url"

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
	h := http.Header{
		HeaderUser:    {b64.EncodeToString([]byte(m.GetPrincipal().GetUser()))},
		HeaderOrg:     {b64.EncodeToString([]byte(m.GetPrincipal().GetOrg()))},
		HeaderRole:    {b64.EncodeToString([]byte(m.GetPrincipal().GetRole()))},
		HeaderOrigin:  {"http://" + m.GetHost()},
		HeaderSession: {grainID},
	}
	if q, err := url.ParseQuery(m.GetRawQuery()); err == nil {
		if mode := q.Get("elicitation_mode"); mode != "" {
			h.Set(HeaderMode, mode)
		}
	}
	if sessionless {
		h.Set(HeaderSessionless, "1")
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
