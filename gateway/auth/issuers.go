package auth

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Principals are keyed by issuer (MCP 2026-07-28 keys credentials by
// issuer). A local issuer ([OAuthOptions.LocalIssuers]) names principals
// in the deployment's own namespace, the one static keys name them in: its
// token with sub "alice" and org "acme" is the principal of a key for
// alice in acme. Every other issuer names principals in a namespace of its
// own: their user and organization are qualified by the issuer,
// "<issuer>#<sub>" and "<issuer>#<org>". An issuer identifier holds no "#"
// (it has no fragment), so the qualified name says which issuer it is of,
// and no issuer's token can be another issuer's principal.
//
// Names of the qualified form are reserved: no static key and no local
// issuer's token may name one, so neither can become a principal of a
// non-local issuer either.

// issuerSeparator joins an issuer and a name in a qualified name.
const issuerSeparator = "#"

// QualifiedName is name (a user or an organization) in issuer's
// namespace: the name a principal of a non-local issuer has.
func QualifiedName(issuer, name string) string { return issuer + issuerSeparator + name }

// IsQualifiedName reports whether name has the form of a name in an
// issuer's namespace ([QualifiedName]): an http(s) URL, "#", anything.
// Such names are reserved for the principals of non-local issuers.
func IsQualifiedName(name string) bool {
	iss, _, ok := strings.Cut(name, issuerSeparator)
	return ok && checkResourceURI(iss) == nil
}

// issuerScope keys the principals of access tokens by issuer.
type issuerScope struct {
	// only is the one trusted issuer, if there is one: a token that names
	// none (an introspection answer without iss) is its.
	only  string
	local map[string]bool
}

// newIssuerScope checks local against the trusted issuers (nil local: the
// only issuer if there is one, else none).
func newIssuerScope(trusted, local []string) (issuerScope, error) {
	s := issuerScope{local: map[string]bool{}}
	if len(trusted) == 1 {
		s.only = trusted[0]
	}
	if local == nil && s.only != "" {
		local = []string{s.only}
	}
	for _, iss := range local {
		if !slices.Contains(trusted, iss) {
			return issuerScope{}, fmt.Errorf("auth: local issuer %q is not one of the authorization servers %v", iss, trusted)
		}
		s.local[iss] = true
	}
	return s, nil
}

// principal keys p, the principal of verified token info, by the token's
// issuer: as is for a local issuer (refused if it names a reserved
// qualified name), qualified for any other.
func (s issuerScope) principal(p *pb.Principal, info *sdkauth.TokenInfo) (*pb.Principal, error) {
	iss, _ := info.Extra["iss"].(string)
	if iss == "" {
		iss = s.only
	}
	if iss == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Code: CodeInvalidToken,
			Message: "token names no issuer (iss): with several trusted authorization servers, principals are keyed by issuer"}
	}
	if s.local[iss] {
		if IsQualifiedName(p.GetUser()) || IsQualifiedName(p.GetOrg()) {
			return nil, &Error{Status: http.StatusUnauthorized, Code: CodeInvalidToken,
				Message: "token names a user or organization of the form <issuer>#<name>, reserved for other issuers' principals"}
		}
		return p, nil
	}
	return &pb.Principal{User: QualifiedName(iss, p.GetUser()), Org: QualifiedName(iss, p.GetOrg()), Role: p.GetRole()}, nil
}
