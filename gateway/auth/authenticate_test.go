package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestAuthenticate(t *testing.T) {
	keys, err := NewKeys(
		Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin},
		Entry{Token: tokBob, User: "bob", Org: "acme"},
	)
	if err != nil {
		t.Fatal(err)
	}
	alice := &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin}
	bob := &pb.Principal{User: "bob", Org: "acme", Role: RoleMember}
	const realm = `Bearer realm="mcpgrain"`

	tests := []struct {
		name       string
		headers    []string // Authorization header values, in order
		want       *pb.Principal
		wantStatus int
		wantCode   string
		wantWWW    string
	}{
		{name: "good token", headers: []string{"Bearer " + tokAlice}, want: alice},
		{name: "scheme is case-insensitive", headers: []string{"bearer " + tokBob}, want: bob},
		{name: "upper-case scheme", headers: []string{"BEARER " + tokAlice}, want: alice},
		{name: "extra spaces", headers: []string{"  Bearer   " + tokAlice + " "}, want: alice},
		{name: "tab separator", headers: []string{"Bearer\t" + tokAlice}, want: alice},
		{
			name: "missing header", headers: nil,
			wantStatus: 401, wantWWW: realm,
		},
		{
			name: "empty header", headers: []string{""},
			wantStatus: 401, wantWWW: realm,
		},
		{
			name: "wrong scheme", headers: []string{"Basic YWxpY2U6cGFzc3dvcmQ="},
			wantStatus: 401, wantWWW: realm,
		},
		{
			name: "scheme without separator", headers: []string{"Bearer" + tokAlice},
			wantStatus: 401, wantWWW: realm,
		},
		{
			name: "bearer without token", headers: []string{"Bearer"},
			wantStatus: 400, wantCode: CodeInvalidRequest,
			wantWWW: realm + `, error="invalid_request", error_description="empty bearer token"`,
		},
		{
			name: "bearer with blank token", headers: []string{"Bearer    "},
			wantStatus: 400, wantCode: CodeInvalidRequest,
		},
		{
			name: "two headers", headers: []string{"Bearer " + tokAlice, "Bearer " + tokAlice},
			wantStatus: 400, wantCode: CodeInvalidRequest,
			wantWWW: realm + `, error="invalid_request", error_description="more than one Authorization header"`,
		},
		{
			name: "two headers, second wrong", headers: []string{"Bearer " + tokAlice, "Basic eDp5"},
			wantStatus: 400, wantCode: CodeInvalidRequest,
		},
		{
			name: "two tokens in one header", headers: []string{"Bearer " + tokAlice + ", Bearer " + tokBob},
			wantStatus: 400, wantCode: CodeInvalidRequest,
		},
		{
			name: "token with space", headers: []string{"Bearer " + tokAlice + " x"},
			wantStatus: 400, wantCode: CodeInvalidRequest,
			wantWWW: realm + `, error="invalid_request", error_description="malformed bearer token"`,
		},
		{
			name: "unknown token", headers: []string{"Bearer " + tokCarol},
			wantStatus: 401, wantCode: CodeInvalidToken,
			wantWWW: realm + `, error="invalid_token", error_description="unknown bearer token"`,
		},
		{
			name: "token prefix", headers: []string{"Bearer " + tokAlice[:len(tokAlice)-1]},
			wantStatus: 401, wantCode: CodeInvalidToken,
		},
		{
			name: "short token", headers: []string{"Bearer x"},
			wantStatus: 401, wantCode: CodeInvalidToken,
		},
	}
	a := NewAuthenticator(keys, AuthOptions{Realm: "mcpgrain"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, err := a.Authenticate(r)
			if tt.want != nil {
				if err != nil || !samePrincipal(got, tt.want) {
					t.Fatalf("Authenticate = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if got != nil {
				t.Errorf("principal = %v, want nil", got)
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %#v, want *Error", err)
			}
			if ae.Status != tt.wantStatus || ae.Code != tt.wantCode {
				t.Errorf("status, code = %d, %q; want %d, %q", ae.Status, ae.Code, tt.wantStatus, tt.wantCode)
			}
			if tt.wantCode == "" && strings.Contains(ae.WWWAuthenticate, "error=") {
				t.Errorf("WWW-Authenticate = %q, want no error code", ae.WWWAuthenticate)
			}
			if tt.wantCode != "" && !strings.Contains(ae.WWWAuthenticate, `error="`+tt.wantCode+`"`) {
				t.Errorf("WWW-Authenticate = %q, want error=%q", ae.WWWAuthenticate, tt.wantCode)
			}
			if tt.wantWWW != "" && ae.WWWAuthenticate != tt.wantWWW {
				t.Errorf("WWW-Authenticate = %q, want %q", ae.WWWAuthenticate, tt.wantWWW)
			}
			if ae.Message == "" || ae.Error() != "auth: "+ae.Message {
				t.Errorf("Message = %q, Error() = %q", ae.Message, ae.Error())
			}
			for _, tok := range []string{tokAlice, tokBob, tokCarol} {
				if strings.Contains(ae.Message, tok) || strings.Contains(ae.WWWAuthenticate, tok) {
					t.Errorf("error leaks a token: %+v", ae)
				}
			}
		})
	}
}

func TestAuthenticateChallenge(t *testing.T) {
	keys, err := NewKeys(Entry{Token: tokAlice, User: "alice", Org: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    AuthOptions
		header  string
		wantWWW string
	}{
		{name: "bare, missing", header: "", wantWWW: `Bearer`},
		{
			name: "bare, unknown", header: "Bearer " + tokCarol,
			wantWWW: `Bearer error="invalid_token", error_description="unknown bearer token"`,
		},
		{
			name:   "resource metadata, missing",
			opts:   AuthOptions{Realm: "mcp", ResourceMetadataURL: "https://gw.example/.well-known/oauth-protected-resource"},
			header: "", wantWWW: `Bearer realm="mcp", resource_metadata="https://gw.example/.well-known/oauth-protected-resource"`,
		},
		{
			name:   "resource metadata, unknown",
			opts:   AuthOptions{ResourceMetadataURL: "https://gw.example/rm"},
			header: "Bearer " + tokCarol, wantWWW: `Bearer resource_metadata="https://gw.example/rm", error="invalid_token", error_description="unknown bearer token"`,
		},
		{
			name:   "realm is quoted",
			opts:   AuthOptions{Realm: "a \"b\" \\c\r\n"},
			header: "", wantWWW: `Bearer realm="a \"b\" \\c"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAuthenticator(keys, tt.opts)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			_, err := a.Authenticate(r)
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if ae.WWWAuthenticate != tt.wantWWW {
				t.Errorf("WWW-Authenticate = %q, want %q", ae.WWWAuthenticate, tt.wantWWW)
			}
		})
	}
	// Failures do not share (and so cannot corrupt) the fixed parameters.
	a := NewAuthenticator(keys, AuthOptions{Realm: "r"})
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+tokCarol)
		_, _ = a.Authenticate(r)
	}
	_, err = a.Authenticate(httptest.NewRequest(http.MethodGet, "/", nil))
	if got := err.(*Error).WWWAuthenticate; got != `Bearer realm="r"` {
		t.Errorf("WWW-Authenticate after failures = %q", got)
	}
}

func TestAuthenticateNoAuth(t *testing.T) {
	a := NewAuthenticator(nil, AuthOptions{NoAuth: true})
	for _, h := range []string{"", "Bearer " + tokCarol, "Basic eDp5"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		p, err := a.Authenticate(r)
		if err != nil {
			t.Fatalf("Authorization %q: %v", h, err)
		}
		want := &pb.Principal{User: "anonymous", Org: "local", Role: "admin"}
		if !samePrincipal(p, want) {
			t.Errorf("Authorization %q: principal %v, want %v", h, p, want)
		}
		p.User = "changed" // a fresh copy each time
	}
	if Anonymous().GetUser() != "anonymous" {
		t.Error("Anonymous() was modified through a returned principal")
	}
}

func TestAuthenticateNilKeys(t *testing.T) {
	a := NewAuthenticator(nil, AuthOptions{})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tokAlice)
	_, err := a.Authenticate(r)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeInvalidToken {
		t.Fatalf("err = %v, want invalid_token", err)
	}
}
