package auth

import (
	"errors"
	"strings"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestClaimMapping(t *testing.T) {
	info := func(scopes []string, extra map[string]any) *sdkauth.TokenInfo {
		return &sdkauth.TokenInfo{Scopes: scopes, Extra: extra}
	}
	acme := map[string]any{"sub": "alice", "org": "acme"}
	tests := []struct {
		name     string
		m        ClaimMapping
		info     *sdkauth.TokenInfo
		want     *pb.Principal
		wantCode string
		wantMsg  string
	}{
		{name: "read scope is a viewer", info: info([]string{"mcp:read"}, acme), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleViewer}},
		{name: "approve scope is a member", info: info([]string{"mcp:approve"}, acme), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleMember}},
		{name: "admin scope is an admin", info: info([]string{"mcp:admin"}, acme), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin}},
		{name: "the highest scope wins", info: info([]string{"mcp:read", "mcp:admin", "mcp:approve"}, acme), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin}},
		{name: "unrelated scopes grant nothing", info: info([]string{"openid", "profile"}, acme), wantCode: CodeInsufficientScope, wantMsg: "needs scope mcp:read"},
		{name: "no scopes", info: info(nil, acme), wantCode: CodeInsufficientScope},
		{
			name: "custom scopes",
			m:    ClaimMapping{Scopes: RoleScopes{Admin: "mcpgrain.admin", Member: "mcpgrain.approve", Viewer: "mcpgrain.read"}},
			info: info([]string{"mcp:admin", "mcpgrain.approve"}, acme), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleMember},
		},
		{
			name: "role claim",
			m:    ClaimMapping{RoleClaim: "mcpgrain_role"},
			info: info(nil, map[string]any{"sub": "alice", "org": "acme", "mcpgrain_role": "admin"}), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin},
		},
		{
			name: "role claim list, highest wins, scopes too",
			m:    ClaimMapping{RoleClaim: "roles"},
			info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "org": "acme", "roles": []any{"viewer", "member", "superuser"}}), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleMember},
		},
		{
			name: "unknown role claim value grants nothing",
			m:    ClaimMapping{RoleClaim: "role"},
			info: info(nil, map[string]any{"sub": "alice", "org": "acme", "role": "owner"}), wantCode: CodeInsufficientScope,
		},
		{
			name: "custom user and org claims, nested path",
			m:    ClaimMapping{UserClaim: "email", OrgClaim: "ext.org"},
			info: info([]string{"mcp:read"}, map[string]any{"sub": "123", "email": "alice@acme.example", "ext": map[string]any{"org": "acme"}}),
			want: &pb.Principal{User: "alice@acme.example", Org: "acme", Role: RoleViewer},
		},
		{
			name: "namespaced claim with dots is read as is",
			m:    ClaimMapping{OrgClaim: "https://acme.example/org"},
			info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "https://acme.example/org": "acme"}),
			want: &pb.Principal{User: "alice", Org: "acme", Role: RoleViewer},
		},
		{name: "one-element org list", info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "org": []any{"acme"}}), want: &pb.Principal{User: "alice", Org: "acme", Role: RoleViewer}},
		{name: "two orgs are ambiguous", info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "org": []any{"acme", "globex"}}), wantCode: CodeInvalidToken, wantMsg: "list of 2"},
		{name: "no org claim", info: info([]string{"mcp:read"}, map[string]any{"sub": "alice"}), wantCode: CodeInvalidToken, wantMsg: `no "org" claim`},
		{
			name: "default org",
			m:    ClaimMapping{DefaultOrg: "local"},
			info: info([]string{"mcp:read"}, map[string]any{"sub": "alice"}), want: &pb.Principal{User: "alice", Org: "local", Role: RoleViewer},
		},
		{name: "no subject", info: info([]string{"mcp:read"}, map[string]any{"org": "acme"}), wantCode: CodeInvalidToken, wantMsg: `no "sub" claim`},
		{name: "numeric org", info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "org": 42.0}), wantCode: CodeInvalidToken, wantMsg: "not a string"},
		{name: "control characters", info: info([]string{"mcp:read"}, map[string]any{"sub": "al\nice", "org": "acme"}), wantCode: CodeInvalidToken},
		{name: "surrounding blanks", info: info([]string{"mcp:read"}, map[string]any{"sub": "alice", "org": " acme"}), wantCode: CodeInvalidToken},
		{name: "huge user", info: info([]string{"mcp:read"}, map[string]any{"sub": strings.Repeat("a", 257), "org": "acme"}), wantCode: CodeInvalidToken, wantMsg: "longer than 256"},
		{name: "nil info", info: nil, wantCode: CodeInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.m.Principal(tt.info)
			if tt.want != nil {
				if err != nil || !samePrincipal(got, tt.want) {
					t.Fatalf("Principal = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tt.wantCode || !strings.Contains(ae.Message, tt.wantMsg) {
				t.Fatalf("Principal = %v, %v; want code %s with %q", got, err, tt.wantCode, tt.wantMsg)
			}
			wantStatus := 401
			if tt.wantCode == CodeInsufficientScope {
				wantStatus = 403
			}
			if ae.Status != wantStatus {
				t.Fatalf("status %d, want %d", ae.Status, wantStatus)
			}
		})
	}
}

func TestScopesOf(t *testing.T) {
	got := scopesOf(map[string]any{"scope": "mcp:read  openid", "scp": []any{"mcp:admin", "mcp:read", 7}})
	want := []string{"mcp:admin", "mcp:read", "openid"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("scopesOf = %v, want %v", got, want)
	}
	if got := scopesOf(map[string]any{"scp": "a b"}); len(got) != 2 {
		t.Fatalf("scp as a string: %v", got)
	}
}
