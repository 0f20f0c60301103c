package openapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// membersSpec has a path with two parameters; the source sends the
// upstream's credential with every call.
const membersSpec = `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{
"/v1/orgs/{org}/members/{member}":{"get":{"operationId":"getMember","parameters":[
 {"name":"org","in":"path","required":true,"schema":{"type":"string"}},
 {"name":"member","in":"path","required":true,"schema":{"type":"string"}}],
 "responses":{"200":{"description":"ok"}}}},
"/v1/tags/{tags}":{"get":{"operationId":"getTags","parameters":[
 {"name":"tags","in":"path","required":true,"schema":{"type":"array","items":{"type":"string"}}}],
 "responses":{"200":{"description":"ok"}}}}}}`

// TestPathParametersCannotChangeThePath: path parameters went out with
// "." and ".." unescaped, so getMember({org: ".."}) sent
// GET /v1/orgs/../members/x — /v1/members/x to the upstream — with the
// source's credentials. Values are now percent-encoded (RFC 3986), and a
// value that is or holds a dot segment, or is empty, is refused before
// anything is sent. A real HTTP server records the request-target it got.
func TestPathParametersCannotChangeThePath(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "gh", Document: []byte(membersSpec), BaseURL: srv.URL,
		Headers: http.Header{"Authorization": {"Bearer upstream-secret"}}, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	for _, org := range []string{"..", ".", "", "../admin", "a/../../x", `..\x`, "a/./b", "x/.."} {
		_, err := src.Call(t.Context(), "getMember", map[string]any{"org": org, "member": "x"})
		var ae *openapi.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("org %q: %v, want an argument error", org, err)
		}
		if s := sent(); len(s) != 0 {
			t.Errorf("org %q: the upstream got %v", org, s)
		}
	}
	if _, err := src.Call(t.Context(), "getTags", map[string]any{"tags": []any{"a", ".."}}); err == nil {
		t.Errorf("a dot segment in an array: sent %v", sent())
	}
	for org, want := range map[string]string{
		"a/b":     "/v1/orgs/a%2Fb/members/x",
		"a?b#c":   "/v1/orgs/a%3Fb%23c/members/x",
		"%2e%2e":  "/v1/orgs/%252e%252e/members/x",
		"a;b=c,d": "/v1/orgs/a%3Bb%3Dc%2Cd/members/x",
		"x y":     "/v1/orgs/x%20y/members/x",
		"...":     "/v1/orgs/.../members/x",
		"v1.2":    "/v1/orgs/v1.2/members/x",
		"ünï":     "/v1/orgs/%C3%BCn%C3%AF/members/x",
	} {
		if _, err := src.Call(t.Context(), "getMember", map[string]any{"org": org, "member": "x"}); err != nil {
			t.Errorf("org %q: %v", org, err)
			continue
		}
		if s := sent(); len(s) != 1 || s[0] != want {
			t.Errorf("org %q: the upstream got %v, want %s", org, s, want)
		}
	}
	// The simple style's delimiters stay delimiters; values are escaped.
	if _, err := src.Call(t.Context(), "getTags", map[string]any{"tags": []any{"a,b", "c"}}); err != nil {
		t.Fatal(err)
	}
	if s := sent(); len(s) != 1 || s[0] != "/v1/tags/a%2Cb,c" {
		t.Errorf("array path parameter: the upstream got %v", s)
	}
}

// FuzzPathParameter: whatever a path parameter holds, the request either
// is refused or reaches the upstream on the template's path — the same
// segments, the parameter's one decoding back to the value.
func FuzzPathParameter(f *testing.F) {
	for _, s := range []string{"..", ".", "", "a/b", "../x", "%2e%2e", "a?b#c", "\x00", "ü", `..\`, "a;b"} {
		f.Add(s)
	}
	var mu sync.Mutex
	var last string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.RequestURI
		mu.Unlock()
	}))
	f.Cleanup(srv.Close)
	src, err := openapi.Load(f.Context(), openapi.Options{Name: "gh", Document: []byte(membersSpec), BaseURL: srv.URL, Client: srv.Client()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, org string) {
		mu.Lock()
		last = ""
		mu.Unlock()
		if _, err := src.Call(t.Context(), "getMember", map[string]any{"org": org, "member": "x"}); err != nil {
			return
		}
		mu.Lock()
		uri := last
		mu.Unlock()
		segs := strings.Split(uri, "/")
		if len(segs) != 6 || segs[1] != "v1" || segs[2] != "orgs" || segs[4] != "members" || segs[5] != "x" {
			t.Fatalf("org %q reached %q", org, uri)
		}
		if dec, err := url.PathUnescape(segs[3]); err != nil || dec != org || segs[3] == "." || segs[3] == ".." {
			t.Fatalf("org %q sent as %q", org, segs[3])
		}
	})
}
