package auth

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Tokens used across the tests; all at least MinTokenLength long.
const (
	tokAlice = "alice-token-0123456789"
	tokBob   = "bob-token-0123456789ab"
	tokCarol = "carol-token-0123456789"
)

func samePrincipal(a, b *pb.Principal) bool {
	return a.GetUser() == b.GetUser() && a.GetOrg() == b.GetOrg() && a.GetRole() == b.GetRole()
}

// wantErr fails t unless err is non-nil and contains every one of subs, and
// checks the error never leaks any of the test tokens.
func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want error containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %q, want it to contain %q", err, s)
		}
	}
	for _, tok := range []string{tokAlice, tokBob, tokCarol, "short-tok"} {
		if strings.Contains(err.Error(), tok) {
			t.Errorf("err = %q leaks a token", err)
		}
	}
}

func TestNewKeys(t *testing.T) {
	alice := Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin}
	bob := Entry{Token: tokBob, User: "bob", Org: "acme", Role: RoleMember}
	tests := []struct {
		name    string
		entries []Entry
		wantLen int
		wantErr []string // substrings; nil means success
	}{
		{name: "none", entries: nil, wantLen: 0},
		{name: "two", entries: []Entry{alice, bob}, wantLen: 2},
		{name: "role defaults to member", entries: []Entry{{Token: tokAlice, User: "a", Org: "o"}}, wantLen: 1},
		{name: "padded token", entries: []Entry{{Token: "abcdefghijklmnop+/==", User: "a", Org: "o"}}, wantLen: 1},
		{name: "empty token", entries: []Entry{alice, {User: "x", Org: "o"}}, wantErr: []string{"entries[1]", "token is empty"}},
		{name: "short token", entries: []Entry{{Token: "short-tok", User: "x", Org: "o"}}, wantErr: []string{"entries[0]", "shorter than 16"}},
		{name: "15 chars", entries: []Entry{{Token: strings.Repeat("a", 15), User: "x", Org: "o"}}, wantErr: []string{"shorter than 16"}},
		{name: "exactly 16 chars", entries: []Entry{{Token: strings.Repeat("a", 16), User: "x", Org: "o"}}, wantLen: 1},
		{name: "space in token", entries: []Entry{{Token: "abcdefgh ijklmnopq", User: "x", Org: "o"}}, wantErr: []string{"characters a bearer token cannot"}},
		{name: "only padding", entries: []Entry{{Token: strings.Repeat("=", 20), User: "x", Org: "o"}}, wantErr: []string{"characters a bearer token cannot"}},
		{name: "padding inside", entries: []Entry{{Token: "abcdefgh=ijklmnopq", User: "x", Org: "o"}}, wantErr: []string{"characters a bearer token cannot"}},
		{name: "empty user", entries: []Entry{{Token: tokAlice, Org: "o"}}, wantErr: []string{"entries[0]", "user is empty"}},
		{name: "empty org", entries: []Entry{{Token: tokAlice, User: "u"}}, wantErr: []string{"entries[0]", "org is empty"}},
		{name: "user with spaces around", entries: []Entry{{Token: tokAlice, User: " u", Org: "o"}}, wantErr: []string{"user", "whitespace"}},
		{name: "org with control char", entries: []Entry{{Token: tokAlice, User: "u", Org: "o\x00"}}, wantErr: []string{"org", "control"}},
		{name: "bad role", entries: []Entry{{Token: tokAlice, User: "u", Org: "o", Role: "Admin"}}, wantErr: []string{`role "Admin"`}},
		{name: "user of an issuer's namespace", entries: []Entry{{Token: tokAlice, User: "https://login.example.com#alice", Org: "o"}},
			wantErr: []string{"entries[0]", "user", "reserved for the principals of OAuth issuers"}},
		{name: "org of an issuer's namespace", entries: []Entry{{Token: tokAlice, User: "u", Org: "http://idp.local:8080/realms/x#acme"}},
			wantErr: []string{"entries[0]", "org", "reserved for the principals of OAuth issuers"}},
		{name: "a # that names no issuer", entries: []Entry{{Token: tokAlice, User: "team#1", Org: "mailto:x#y"}}, wantLen: 1},
		{name: "duplicate token", entries: []Entry{alice, bob, {Token: tokAlice, User: "eve", Org: "evil"}}, wantErr: []string{"entries[2]", "duplicate token", "entries[0]"}},
		{name: "duplicate token same principal", entries: []Entry{alice, alice}, wantErr: []string{"entries[1]", "duplicate token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := NewKeys(tt.entries...)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatalf("NewKeys: %v", err)
			}
			if k.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", k.Len(), tt.wantLen)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	k, err := NewKeys(
		Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin},
		Entry{Token: tokBob, User: "bob", Org: "acme"},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token string
		want  *pb.Principal // nil: not found
	}{
		{tokAlice, &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin}},
		{tokBob, &pb.Principal{User: "bob", Org: "acme", Role: RoleMember}},
		{tokCarol, nil},
		{"", nil},
		{tokAlice + "x", nil},
		{tokAlice[:len(tokAlice)-1], nil},
		{strings.ToUpper(tokAlice), nil},
	}
	for _, tt := range tests {
		got, ok := k.Lookup(tt.token)
		if ok != (tt.want != nil) || !samePrincipal(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, %v; want %v", tt.token, got, ok, tt.want)
		}
	}

	// The lookups of a token share one message (never modified: see
	// Lookup); another token's is another.
	p, _ := k.Lookup(tokAlice)
	if again, _ := k.Lookup(tokAlice); again != p || again.GetRole() != RoleAdmin {
		t.Errorf("a second lookup of the token: %v (%p, first %p)", again, again, p)
	}
	if other, ok := k.Lookup(tokBob); ok && other == p {
		t.Error("two tokens share a principal")
	}

	var nilKeys *Keys
	if _, ok := nilKeys.Lookup(tokAlice); ok || nilKeys.Len() != 0 {
		t.Error("nil Keys should be empty")
	}
}

func TestMerge(t *testing.T) {
	alice := Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin}
	bob := Entry{Token: tokBob, User: "bob", Org: "acme"}
	carol := Entry{Token: tokCarol, User: "carol", Org: "other"}
	mustKeys := func(es ...Entry) *Keys {
		k, err := NewKeys(es...)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tests := []struct {
		name    string
		a, b    *Keys
		wantLen int
		wantErr []string
	}{
		{name: "disjoint", a: mustKeys(alice), b: mustKeys(bob, carol), wantLen: 3},
		{name: "identical duplicate", a: mustKeys(alice, bob), b: mustKeys(alice), wantLen: 2},
		{name: "nil other", a: mustKeys(alice), b: nil, wantLen: 1},
		{name: "nil receiver", a: nil, b: mustKeys(alice), wantLen: 1},
		{name: "both nil", wantLen: 0},
		{
			name:    "conflict",
			a:       mustKeys(alice),
			b:       mustKeys(bob, Entry{Token: tokAlice, User: "eve", Org: "acme", Role: RoleAdmin}),
			wantErr: []string{"same token", "different principals", `"alice"`, `"eve"`, "entries[0]", "entries[1]"},
		},
		{
			name:    "role conflict",
			a:       mustKeys(alice),
			b:       mustKeys(Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleMember}),
			wantErr: []string{"different principals"},
		},
		{
			name:    "several conflicts",
			a:       mustKeys(alice, bob),
			b:       mustKeys(Entry{Token: tokAlice, User: "x", Org: "o"}, Entry{Token: tokBob, User: "y", Org: "o"}),
			wantErr: []string{"and 1 more"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aLen, bLen := tt.a.Len(), tt.b.Len()
			m, err := tt.a.Merge(tt.b)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr...)
			} else if err != nil {
				t.Fatalf("Merge: %v", err)
			} else if m.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", m.Len(), tt.wantLen)
			}
			if tt.a.Len() != aLen || tt.b.Len() != bLen {
				t.Error("Merge modified its inputs")
			}
		})
	}

	m, err := mustKeys(alice).Merge(mustKeys(bob))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{alice, bob} {
		if p, ok := m.Lookup(e.Token); !ok || p.GetUser() != e.User {
			t.Errorf("merged Lookup(%s) = %v, %v", e.User, p, ok)
		}
	}
}

func writeKeysFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	return path
}

func TestLoadKeysFile(t *testing.T) {
	good := `{"keys": [
  {"token": "` + tokAlice + `", "user": "alice", "org": "acme", "role": "admin"},
  {"token": "` + tokBob + `", "user": "bob", "org": "acme"}
]}`
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		wantLen int
		wantErr []string // besides the path, which every error must name
	}{
		{name: "good", content: good, mode: 0o600, wantLen: 2},
		{name: "good, group-readable", content: good, mode: 0o640, wantLen: 2},
		{name: "empty keys", content: `{"keys": []}`, mode: 0o600, wantLen: 0},
		{name: "world-readable", content: good, mode: 0o644, wantErr: []string{"readable by every user", "0644", "chmod 600"}},
		{name: "world-readable only", content: good, mode: 0o604, wantErr: []string{"chmod 600"}},
		{name: "empty file", content: "", mode: 0o600, wantErr: []string{"empty"}},
		{name: "malformed JSON", content: "{\"keys\": [\n  {\"token\": \"" + tokAlice + "\",, }\n]}", mode: 0o600, wantErr: []string{"invalid JSON", "line 2, column"}},
		{name: "truncated JSON", content: `{"keys": [`, mode: 0o600, wantErr: []string{"unexpected end"}},
		{name: "trailing data", content: good + `{}`, mode: 0o600, wantErr: []string{"after the top-level"}},
		{name: "not an object", content: `[]`, mode: 0o600, wantErr: []string{"want a JSON object"}},
		{name: "keys not an array", content: `{"keys": {}}`, mode: 0o600, wantErr: []string{`field "keys"`, "want an array"}},
		{name: "unknown top-level field", content: `{"keys": [], "tokens": []}`, mode: 0o600, wantErr: []string{`unknown field "tokens"`}},
		{
			name:    "unknown entry field",
			content: `{"keys": [{"token": "` + tokAlice + `", "user": "a", "org": "o"}, {"token": "` + tokBob + `", "user": "b", "org": "o", "roles": "admin"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[1]", `unknown field "roles"`},
		},
		{
			name:    "wrong type in entry",
			content: `{"keys": [{"token": 12345678901234567, "user": "a", "org": "o"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[0]", `field "token"`, "want a string"},
		},
		{
			name:    "invalid entry",
			content: `{"keys": [{"token": "` + tokAlice + `", "user": "a", "org": "o"}, {"token": "` + tokBob + `", "org": "o"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[1]", "user is empty"},
		},
		{
			name:    "bad role",
			content: `{"keys": [{"token": "` + tokAlice + `", "user": "a", "org": "o", "role": "owner"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[0]", `role "owner"`},
		},
		{
			name:    "short token",
			content: `{"keys": [{"token": "short-tok", "user": "a", "org": "o"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[0]", "shorter than 16"},
		},
		{
			name:    "duplicate token",
			content: `{"keys": [{"token": "` + tokAlice + `", "user": "a", "org": "o"}, {"token": "` + tokAlice + `", "user": "b", "org": "o"}]}`,
			mode:    0o600,
			wantErr: []string{"keys[1]", "duplicate token", "keys[0]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tt.mode&0o004 != 0 {
				t.Skip("no mode bits on Windows")
			}
			path := writeKeysFile(t, tt.content, tt.mode)
			k, err := LoadKeysFile(path)
			if tt.wantErr != nil {
				wantErr(t, err, append([]string{path}, tt.wantErr...)...)
				return
			}
			if err != nil {
				t.Fatalf("LoadKeysFile: %v", err)
			}
			if k.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", k.Len(), tt.wantLen)
			}
		})
	}

	t.Run("contents", func(t *testing.T) {
		k, err := LoadKeysFile(writeKeysFile(t, good, 0o600))
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := k.Lookup(tokBob); !ok || !samePrincipal(p, &pb.Principal{User: "bob", Org: "acme", Role: RoleMember}) {
			t.Errorf("Lookup(bob) = %v, %v", p, ok)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.json")
		_, err := LoadKeysFile(path)
		wantErr(t, err, path)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want a not-exist error", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := LoadKeysFile(dir)
		wantErr(t, err, dir, "not a regular file")
	})
}

func TestParseKeysEnv(t *testing.T) {
	tests := []struct {
		name    string
		v       string
		want    map[string]*pb.Principal // token → principal
		wantErr []string
	}{
		{name: "empty", v: "", want: map[string]*pb.Principal{}},
		{name: "blank", v: " ; ;\n", want: map[string]*pb.Principal{}},
		{
			name: "two",
			v:    tokAlice + "=alice:acme:admin;" + tokBob + "=bob:acme:member",
			want: map[string]*pb.Principal{
				tokAlice: {User: "alice", Org: "acme", Role: RoleAdmin},
				tokBob:   {User: "bob", Org: "acme", Role: RoleMember},
			},
		},
		{
			name: "whitespace, newlines, trailing semicolon, empty role",
			v:    "\n  " + tokAlice + "=alice:acme:admin;\n  " + tokBob + "=bob:acme:;\n",
			want: map[string]*pb.Principal{
				tokAlice: {User: "alice", Org: "acme", Role: RoleAdmin},
				tokBob:   {User: "bob", Org: "acme", Role: RoleMember},
			},
		},
		{
			name: "padded token",
			v:    "abcdefghijklmnopq==" + "=alice:acme:admin",
			want: map[string]*pb.Principal{"abcdefghijklmnopq==": {User: "alice", Org: "acme", Role: RoleAdmin}},
		},
		{name: "missing =", v: tokAlice + "=alice:acme:admin;" + tokBob + ":bob:acme:member", wantErr: []string{"MCPGRAIN_KEYS entry 2", "missing '='"}},
		{name: "two fields", v: tokAlice + "=alice:acme", wantErr: []string{"entry 1", "token=user:org:role", "got 2"}},
		{name: "four fields", v: tokAlice + "=alice:acme:admin:x", wantErr: []string{"entry 1", "got 4"}},
		{name: "position counts empty entries", v: tokAlice + "=alice:acme:admin;;" + tokBob + "=bob::member", wantErr: []string{"entry 3", "org is empty"}},
		{name: "empty token", v: "=alice:acme:admin", wantErr: []string{"entry 1", "token is empty"}},
		{name: "short token", v: "short-tok=alice:acme:admin", wantErr: []string{"entry 1", "shorter than 16"}},
		{name: "bad role", v: tokAlice + "=alice:acme:root", wantErr: []string{"entry 1", `role "root"`}},
		{name: "duplicate", v: tokAlice + "=alice:acme:admin;" + tokAlice + "=eve:acme:admin", wantErr: []string{"entry 2", "duplicate token", "entry 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKeysEnv(tt.v)
			if tt.wantErr != nil {
				wantErr(t, err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatalf("ParseKeysEnv: %v", err)
			}
			if k.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", k.Len(), len(tt.want))
			}
			for tok, want := range tt.want {
				if got, ok := k.Lookup(tok); !ok || !samePrincipal(got, want) {
					t.Errorf("Lookup(%q) = %v, %v; want %v", tok, got, ok, want)
				}
			}
		})
	}
}

func TestGenerateToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := GenerateToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
			t.Fatalf("token %q: want %q + 43 base64url characters", tok, TokenPrefix)
		}
		if seen[tok] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok] = true
		k, err := NewKeys(Entry{Token: tok, User: "u", Org: "o"})
		if err != nil {
			t.Fatalf("generated token rejected: %v", err)
		}
		if _, ok := k.Lookup(tok); !ok {
			t.Fatal("generated token not found")
		}
	}
}
