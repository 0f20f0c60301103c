package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/mcpupstream"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// CodeConfig configures code mode: the engine behind the "code" tool pack
// and the tool sources its code calls.
type CodeConfig struct {
	// DemoAPI serves the built-in to-do API at /demo/ on the HTTP listener
	// and, with the code pack, registers it as tool source "demo".
	DemoAPI bool
	// OpenAPI are OpenAPI tool sources.
	OpenAPI []OpenAPISource
	// Upstreams are upstream MCP servers used as tool sources.
	Upstreams []UpstreamSource
	// Policy decides which calls need approval (nil: the sources'
	// defaults — OpenAPI writes and upstream MCP tools not marked
	// read-only need approval).
	Policy *policy.Set
	// Window is how long a paused execution waits for a decision before
	// it is declined (zero: 4 minutes).
	Window time.Duration
	// Limits bound each execution (zero fields: sandbox defaults).
	Limits sandbox.Limits
	// Pool configures the node's sandbox worker processes: the running
	// caps per node and per principal, spares, recycling (zero fields:
	// sandbox defaults). Its Registerer is the node's.
	Pool sandbox.PoolOptions
	// PublicURL is the origin approval links point at (empty: the host
	// the MCP request came to).
	PublicURL string
	// Clock tells time (nil: the system clock). Tests inject one.
	Clock clock.Clock
}

// OpenAPISource is one OpenAPI tool source.
type OpenAPISource struct {
	// Name is the source name: code calls tools.<Name>.<operationId>.
	Name string `json:"name"`
	// Spec is the document's file path or http(s) URL.
	Spec string `json:"spec"`
	// BaseURL overrides the document's servers.
	BaseURL string `json:"baseUrl,omitempty"`
	// Headers are sent with every API call (credentials). Values may
	// name environment variables as ${VAR}.
	Headers map[string]string `json:"headers,omitempty"`
}

// UpstreamSource is one upstream MCP server tool source.
type UpstreamSource struct {
	// Name is the source name: code calls tools.<Name>.<tool>.
	Name string `json:"name"`
	// URL is the upstream's streamable HTTP endpoint.
	URL string `json:"url"`
	// Headers are sent with every request. Values may name environment
	// variables as ${VAR}.
	Headers map[string]string `json:"headers,omitempty"`
}

// SourcesFile is the JSON document --sources reads.
type SourcesFile struct {
	OpenAPI []OpenAPISource  `json:"openapi"`
	MCP     []UpstreamSource `json:"mcp"`
}

// LoadSourcesFile reads a --sources file; unknown fields are errors.
func LoadSourcesFile(path string) (SourcesFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return SourcesFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	var f SourcesFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return SourcesFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// headers expands ${VAR} references in header values; a missing variable
// is an error (a credential silently sent empty is worse than no start).
func headers(source string, h map[string]string) (http.Header, error) {
	out := http.Header{}
	for k, v := range h {
		var missing []string
		val := os.Expand(v, func(name string) string {
			s, ok := os.LookupEnv(name)
			if !ok {
				missing = append(missing, name)
			}
			return s
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("source %s: header %s names unset environment variable(s) %s", source, k, strings.Join(missing, ", "))
		}
		out.Set(k, val)
	}
	return out, nil
}

// localURL is an http URL that reaches the listener at addr from this
// process (an unspecified host becomes loopback).
func localURL(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}

// codeSources builds the tool registry: the demo API (when served, as
// source "demo" at /demo/ on the HTTP listener), then the configured
// sources. closeFn ends upstream sessions.
func codeSources(ctx context.Context, cfg CodeConfig, demoAPI *demo.API, httpAddr net.Addr) (reg *tools.Registry, closeFn func(), err error) {
	var sources []tools.Source
	var closers []func() error
	closeFn = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	defer func() {
		if err != nil {
			closeFn()
		}
	}()
	if demoAPI != nil {
		src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Spec: "demo", Document: demoAPI.Spec(localURL(httpAddr) + "/demo")})
		if err != nil {
			return nil, nil, fmt.Errorf("demo source: %w", err)
		}
		sources = append(sources, src)
	}
	for _, s := range cfg.OpenAPI {
		h, err := headers(s.Name, s.Headers)
		if err != nil {
			return nil, nil, err
		}
		src, err := openapi.Load(ctx, openapi.Options{Name: s.Name, Spec: s.Spec, BaseURL: s.BaseURL, Headers: h})
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, src)
	}
	for _, u := range cfg.Upstreams {
		h, err := headers(u.Name, u.Headers)
		if err != nil {
			return nil, nil, err
		}
		src, err := mcpupstream.New(ctx, mcpupstream.Options{Name: u.Name, Endpoint: u.URL, Headers: h})
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, src.Close)
		sources = append(sources, src)
	}
	reg, err = tools.NewRegistry(sources...)
	if err != nil {
		return nil, nil, err
	}
	return reg, closeFn, nil
}
