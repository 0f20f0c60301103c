package auth

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Defaults of [ClaimMapping] and [RoleScopes].
const (
	// DefaultUserClaim names the user: the token's subject.
	DefaultUserClaim = "sub"
	// DefaultOrgClaim names the organization.
	DefaultOrgClaim = "org"
	// DefaultAdminScope grants [RoleAdmin].
	DefaultAdminScope = "mcp:admin"
	// DefaultMemberScope grants [RoleMember]: it may decide paused
	// executions.
	DefaultMemberScope = "mcp:approve"
	// DefaultViewerScope grants [RoleViewer]: it may use /mcp and see
	// paused executions, never decide them. It is the scope a 401
	// challenge asks for.
	DefaultViewerScope = "mcp:read"
)

// maxClaimLen bounds a user or organization taken from a token: both end
// up in store rows and logs.
const maxClaimLen = 256

// RoleScopes names the OAuth scope that grants each role. A token's role
// is the highest one any of its scopes (or its role claim, see
// [ClaimMapping.RoleClaim]) grants. Empty fields take the Default*Scope
// constants.
type RoleScopes struct {
	// Admin grants [RoleAdmin]. Default [DefaultAdminScope].
	Admin string
	// Member grants [RoleMember]. Default [DefaultMemberScope].
	Member string
	// Viewer grants [RoleViewer]. Default [DefaultViewerScope].
	Viewer string
}

// withDefaults fills empty fields.
func (s RoleScopes) withDefaults() RoleScopes {
	if s.Admin == "" {
		s.Admin = DefaultAdminScope
	}
	if s.Member == "" {
		s.Member = DefaultMemberScope
	}
	if s.Viewer == "" {
		s.Viewer = DefaultViewerScope
	}
	return s
}

// For returns the scope that grants role ("" for an unknown role).
func (s RoleScopes) For(role string) string {
	s = s.withDefaults()
	switch role {
	case RoleAdmin:
		return s.Admin
	case RoleMember:
		return s.Member
	case RoleViewer:
		return s.Viewer
	}
	return ""
}

// List returns the three scopes, least privileged first (what protected
// resource metadata advertises as scopes_supported).
func (s RoleScopes) List() []string {
	s = s.withDefaults()
	return []string{s.Viewer, s.Member, s.Admin}
}

// rank orders the roles; 0 is no role.
func rank(role string) int {
	switch role {
	case RoleViewer:
		return 1
	case RoleMember:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// ClaimMapping turns a verified access token ([sdkauth.TokenInfo], whose
// Extra holds the token's claims) into a principal. The zero value maps
// "sub" to the user, "org" to the organization and the default scopes to
// roles.
//
// A claim name is looked up as is first; a name with dots that is not a
// claim of its own is then followed as a path through nested objects, so
// "ext.org" reads {"ext": {"org": "acme"}} while a namespaced claim such as
// "https://example.com/org" still works.
type ClaimMapping struct {
	// UserClaim names the user. Default [DefaultUserClaim] ("sub").
	UserClaim string
	// OrgClaim names the organization. Default [DefaultOrgClaim] ("org").
	// A token without it is refused unless DefaultOrg is set.
	OrgClaim string
	// DefaultOrg is the organization of tokens without the org claim (a
	// single-organization deployment whose authorization server names
	// none). Empty: such tokens are refused.
	DefaultOrg string
	// RoleClaim, if set, names a claim holding a role ("admin", "member",
	// "viewer") or a list of them; the principal gets the highest role it
	// or the token's scopes grant.
	RoleClaim string
	// Scopes names the scope of each role.
	Scopes RoleScopes
}

// mapError is why a verified token yields no principal.
type mapError struct {
	// status is 401 (the token names no principal) or 403 (it grants no
	// role: insufficient_scope).
	status int
	msg    string
}

func (e *mapError) Error() string { return "auth: " + e.msg }

// Principal returns the principal info names. The error is an *[Error]
// without a challenge (the [Authenticator] adds it): 401 invalid_token
// when the token names no valid user or organization, 403
// insufficient_scope when it grants no role.
func (m ClaimMapping) Principal(info *sdkauth.TokenInfo) (*pb.Principal, error) {
	p, err := m.principal(info)
	if err != nil {
		code := CodeInvalidToken
		if err.status == http.StatusForbidden {
			code = CodeInsufficientScope
		}
		return nil, &Error{Status: err.status, Code: code, Message: err.msg}
	}
	return p, nil
}

func (m ClaimMapping) principal(info *sdkauth.TokenInfo) (*pb.Principal, *mapError) {
	if info == nil {
		return nil, &mapError{http.StatusUnauthorized, "token carries no claims"}
	}
	userClaim, orgClaim := m.UserClaim, m.OrgClaim
	if userClaim == "" {
		userClaim = DefaultUserClaim
	}
	if orgClaim == "" {
		orgClaim = DefaultOrgClaim
	}
	user, err := stringClaim(info.Extra, userClaim)
	if err != nil {
		return nil, &mapError{http.StatusUnauthorized, err.Error()}
	}
	if user == "" && userClaim == DefaultUserClaim {
		user = info.UserID // a verifier that set the subject but no claims
	}
	if user == "" {
		return nil, &mapError{http.StatusUnauthorized, fmt.Sprintf("token has no %q claim (the user)", userClaim)}
	}
	org, err := stringClaim(info.Extra, orgClaim)
	if err != nil {
		return nil, &mapError{http.StatusUnauthorized, err.Error()}
	}
	if org == "" {
		org = m.DefaultOrg
	}
	if org == "" {
		return nil, &mapError{http.StatusUnauthorized, fmt.Sprintf("token has no %q claim (the organization)", orgClaim)}
	}
	for field, v := range map[string]string{userClaim: user, orgClaim: org} {
		if err := validateName(fmt.Sprintf("claim %q", field), v); err != nil {
			return nil, &mapError{http.StatusUnauthorized, err.Error()}
		}
		if len(v) > maxClaimLen {
			return nil, &mapError{http.StatusUnauthorized, fmt.Sprintf("claim %q is longer than %d bytes", field, maxClaimLen)}
		}
	}
	role := m.role(info)
	if role == "" {
		return nil, &mapError{http.StatusForbidden, "the token grants no role: it needs scope " + m.Scopes.For(RoleViewer) + " (or " +
			m.Scopes.For(RoleMember) + ", " + m.Scopes.For(RoleAdmin) + ")"}
	}
	return &pb.Principal{User: user, Org: org, Role: role}, nil
}

// role is the highest role the token's scopes or role claim grant ("":
// none).
func (m ClaimMapping) role(info *sdkauth.TokenInfo) string {
	best := ""
	consider := func(role string) {
		if rank(role) > rank(best) {
			best = role
		}
	}
	s := m.Scopes.withDefaults()
	for _, sc := range info.Scopes {
		switch sc {
		case s.Admin:
			consider(RoleAdmin)
		case s.Member:
			consider(RoleMember)
		case s.Viewer:
			consider(RoleViewer)
		}
	}
	if m.RoleClaim != "" {
		switch v := lookupClaim(info.Extra, m.RoleClaim).(type) {
		case string:
			consider(v)
		case []any:
			for _, e := range v {
				if r, ok := e.(string); ok {
					consider(r)
				}
			}
		}
	}
	return best
}

// lookupClaim finds name in claims: as a claim of its own, else (if it has
// dots) as a path through nested objects. nil if absent.
func lookupClaim(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	if !strings.Contains(name, ".") {
		return nil
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = obj[part]; !ok {
			return nil
		}
	}
	return cur
}

// stringClaim reads a claim that names something: a string, or a list
// holding exactly one string. "" with a nil error if absent.
func stringClaim(claims map[string]any, name string) (string, error) {
	switch v := lookupClaim(claims, name).(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []any:
		if len(v) == 1 {
			if s, ok := v[0].(string); ok {
				return s, nil
			}
		}
		return "", fmt.Errorf("claim %q is a list of %d values; want one string", name, len(v))
	default:
		return "", fmt.Errorf("claim %q is not a string", name)
	}
}

// scopesOf reads an access token's scopes from its claims: "scope", a
// space-separated string (RFC 9068, RFC 7662), and "scp", a list or a
// string (as Hydra, Okta and Entra ID write it).
func scopesOf(claims map[string]any) []string {
	var out []string
	add := func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok && s != "" {
					out = append(out, s)
				}
			}
		}
	}
	add(claims["scope"])
	add(claims["scp"])
	slices.Sort(out)
	return slices.Compact(out)
}
