package exchange

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"unsafe"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// HeaderIdentity is the header a grain adds to a tunnelled request so
// handlers inside it (tool handlers, middlewares) know the caller: a
// [Caller] in one field ([Caller.Encode]). The gateway never forwards a
// client's X-Mcpgrain-* headers (Forwarded), and a grain's field replaces
// one of the same name, so a client cannot set it. It never leaves the
// process: the exchange carries the principal (HttpExchange.principal),
// and the serving node builds this header from it.
//
// One field, not one an item: go-sdk keeps the header of a session's last
// request for the session's life, and a Go map of more than 8 entries
// outgrows its single group (~0.4 KB more a resident session).
const HeaderIdentity = "X-Mcpgrain-Identity"

// HeaderRestored is set on the response to a request that restored its
// session's runtime (a cold restore after passivation or a move), so a
// client — mcpgrain bench's scale scenario — can tell warm answers from
// cold ones. It tells the caller only about its own session.
const HeaderRestored = "Mcpgrain-Restored"

var b64 = base64.RawURLEncoding

// HeaderValue is the first value of h's field name, what h.Get(name)
// returns, for a name in canonical form (textproto.CanonicalMIMEHeaderKey's:
// the constants of this module's headers). It indexes the map directly:
// Get canonicalizes its key on every lookup, scanning it even when it is
// canonical already, and a warm call looks up these headers a few dozen
// times.
func HeaderValue(h http.Header, name string) string {
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Caller is what [HeaderIdentity] tells a request's handlers.
type Caller struct {
	// User, Org and Role are the authenticated principal's.
	User, Org, Role string
	// Origin is the public origin the request came in on ("http://host").
	Origin string
	// Mode is the request's ?elicitation_mode=, or "".
	Mode string
	// Sessionless is set for a request served without an MCP session (a
	// 2026-07-28 client's, a task's run, a continuation's).
	Sessionless bool
	// Session is the id of the grain serving the request.
	Session string
}

// identitySep separates the encoded fields: not in base64url's alphabet.
const identitySep = "."

// Encode is c as HeaderIdentity's value: user, org, role, origin and mode
// in unpadded base64url, the sessionless flag ("1" or ""), then the
// session id as it is (the rest of the value: a lookup by session, the
// common read, takes a substring).
func (c Caller) Encode() string {
	enc := [...]string{c.User, c.Org, c.Role, c.Origin, c.Mode}
	n := len(enc) + 2 + len(c.Session)
	for _, s := range enc {
		n += b64.EncodedLen(len(s))
	}
	b := make([]byte, 0, n)
	for _, s := range enc {
		// Read only: no copy of s (a []byte(s) of more than 32 bytes is one).
		b = b64.AppendEncode(b, unsafe.Slice(unsafe.StringData(s), len(s)))
		b = append(b, identitySep...)
	}
	if c.Sessionless {
		b = append(b, '1')
	}
	b = append(b, identitySep...)
	b = append(b, c.Session...)
	// b is not written again: the string shares its bytes (one
	// allocation, not two, as strings.Builder does).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Header is a header holding only c.
func (c Caller) Header() http.Header {
	return http.Header{HeaderIdentity: {c.Encode()}}
}

// Identity returns the header describing m's caller, its elicitation mode
// (?elicitation_mode=), its public origin, and the grain serving it: a
// header holding [IdentityValue] alone.
func Identity(m *pb.HttpExchange, grainID string, sessionless bool) http.Header {
	return callerOf(m, originScheme+m.GetHost(), grainID, sessionless).Header()
}

// IdentityValue is [Identity]'s one value ([HeaderIdentity]'s), what
// [Start] takes: a grain serving an exchange passes the value, and the
// request's header is made once, with it ([Identity]'s own header, a map
// and its slice, would be copied into the request's and dropped).
func IdentityValue(m *pb.HttpExchange, grainID string, sessionless bool) string {
	// The origin on the stack: only its encoding is kept.
	var buf [96]byte
	origin := append(append(buf[:0], originScheme...), m.GetHost()...)
	return callerOf(m, unsafe.String(unsafe.SliceData(origin), len(origin)), grainID, sessionless).Encode()
}

// originScheme is what a request's origin is its host after.
const originScheme = "http://"

// callerOf is the caller of m, with origin, served by grain grainID.
func callerOf(m *pb.HttpExchange, origin, grainID string, sessionless bool) Caller {
	p := m.GetPrincipal()
	c := Caller{User: p.GetUser(), Org: p.GetOrg(), Role: p.GetRole(), Origin: origin,
		Sessionless: sessionless, Session: grainID}
	if m.GetRawQuery() != "" {
		if q, err := url.ParseQuery(m.GetRawQuery()); err == nil {
			c.Mode = q.Get("elicitation_mode")
		}
	}
	return c
}

// CallerOf reads the caller from h's [HeaderIdentity]: the zero Caller if
// h has none, or one that does not decode.
func CallerOf(h http.Header) Caller {
	v := HeaderValue(h, HeaderIdentity)
	var enc [5]string
	for i := range enc {
		var ok bool
		if enc[i], v, ok = strings.Cut(v, identitySep); !ok {
			return Caller{}
		}
	}
	flag, session, ok := strings.Cut(v, identitySep)
	if !ok {
		return Caller{}
	}
	// The five decoded into one string, then cut.
	var ends [5]int
	b := make([]byte, 0, len(enc[0])+len(enc[1])+len(enc[2])+len(enc[3])+len(enc[4]))
	for i, e := range enc {
		var err error
		if b, err = b64.AppendDecode(b, unsafe.Slice(unsafe.StringData(e), len(e))); err != nil { // read only
			return Caller{}
		}
		ends[i] = len(b)
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
	return Caller{User: s[:ends[0]], Org: s[ends[0]:ends[1]], Role: s[ends[1]:ends[2]],
		Origin: s[ends[2]:ends[3]], Mode: s[ends[3]:ends[4]], Sessionless: flag == "1", Session: session}
}

// SessionOf is the session (grain) id in h's [HeaderIdentity], or "": a
// substring of the value, no decoding.
func SessionOf(h http.Header) string {
	v := HeaderValue(h, HeaderIdentity)
	for range 6 {
		var ok bool
		if _, v, ok = strings.Cut(v, identitySep); !ok {
			return ""
		}
	}
	return v
}

// PrincipalOf reads the caller's principal from h's [HeaderIdentity].
func PrincipalOf(h http.Header) *pb.Principal {
	c := CallerOf(h)
	return &pb.Principal{User: c.User, Org: c.Org, Role: c.Role}
}

// ApprovalURL is the approval page of execution id: at publicURL when one
// is configured, else at the origin the request came in on (h's
// [HeaderIdentity]; h may be nil).
func ApprovalURL(publicURL string, h http.Header, id string) string {
	origin := publicURL
	if origin == "" && h != nil {
		origin = CallerOf(h).Origin
	}
	return strings.TrimRight(origin, "/") + "/approve/" + id
}
