package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSources(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "pets.yaml")
	if err := os.WriteFile(spec, []byte("openapi: 3.0.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHECK_SOURCES_TOKEN", "t")
	_ = os.Unsetenv("CHECK_SOURCES_UNSET")
	auth := func(v string) map[string]string { return map[string]string{"Authorization": "Bearer " + v} }
	cases := []struct {
		name string
		cfg  CodeConfig
		want string // empty: no error
	}{
		{"none", CodeConfig{DemoAPI: true}, ""},
		{"good", CodeConfig{DemoAPI: true,
			OpenAPI:   []OpenAPISource{{Name: "pets", Spec: spec, Headers: auth("${CHECK_SOURCES_TOKEN}"), From: "--openapi"}, {Name: "remote", Spec: "https://api.example.com/openapi.json", BaseURL: "https://api.example.com"}},
			Upstreams: []UpstreamSource{{Name: "gh", URL: "https://mcp.example.com/mcp", Headers: auth("${CHECK_SOURCES_TOKEN}")}}}, ""},
		{"missing spec file", CodeConfig{OpenAPI: []OpenAPISource{{Name: "pets", Spec: spec + ".nope", From: "--openapi"}}},
			`tool source "pets" (--openapi): spec: stat ` + spec + `.nope: no such file or directory`},
		{"spec is a directory", CodeConfig{OpenAPI: []OpenAPISource{{Name: "pets", Spec: filepath.Dir(spec)}}}, "is a directory"},
		{"no spec", CodeConfig{OpenAPI: []OpenAPISource{{Name: "pets"}}}, `tool source "pets": no spec`},
		{"bad base URL", CodeConfig{OpenAPI: []OpenAPISource{{Name: "pets", Spec: spec, BaseURL: "api.example.com"}}}, `base URL "api.example.com"`},
		{"bad spec URL", CodeConfig{OpenAPI: []OpenAPISource{{Name: "pets", Spec: "https://"}}}, `spec URL "https://"`},
		{"unset variable", CodeConfig{Upstreams: []UpstreamSource{{Name: "gh", URL: "https://x/mcp", Headers: auth("${CHECK_SOURCES_UNSET}"), From: "--sources s.json"}}},
			`tool source "gh" (--sources s.json): header Authorization names unset environment variable(s) CHECK_SOURCES_UNSET`},
		{"relative upstream URL", CodeConfig{Upstreams: []UpstreamSource{{Name: "gh", URL: "localhost:3000/mcp"}}}, "not an absolute http(s) URL"},
		{"bad name", CodeConfig{Upstreams: []UpstreamSource{{Name: "my-gh", URL: "https://x/mcp"}}}, `tool source "my-gh": invalid name`},
		{"demo taken", CodeConfig{DemoAPI: true, Upstreams: []UpstreamSource{{Name: "demo", URL: "https://x/mcp"}}}, "another tool source has this name"},
		{"demo free without the demo API", CodeConfig{Upstreams: []UpstreamSource{{Name: "demo", URL: "https://x/mcp"}}}, ""},
		{"twice", CodeConfig{OpenAPI: []OpenAPISource{{Name: "x", Spec: spec}}, Upstreams: []UpstreamSource{{Name: "x", URL: "https://x/mcp"}}}, `tool source "x": another tool source has this name`},
	}
	for _, tc := range cases {
		err := CheckSources(tc.cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
