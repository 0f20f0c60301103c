package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	// (one list per organization, to authenticated callers) and, with the
	// code pack, registers it as tool source "demo" (called in process).
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
	// it is declined (zero: engine.DefaultApprovalWindow).
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
	// APIBudget bounds the TypeScript declarations of the sources'
	// operations in the execute tool's description, in bytes (zero:
	// tools.DefaultDeclarationBudget; negative: none, only the names).
	APIBudget int
	// Clock tells time: approval windows, upstream retries (nil: the
	// system clock). Tests inject one.
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
	// From says where the source was configured, for errors: a flag
	// ("--openapi") or a file ("--sources s.json"). Empty: not said.
	From string `json:"-"`
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
	// Expose also lists the upstream's tools as MCP tools of the node,
	// "<Name>.<tool>", each call decided by the same policies as code
	// mode's calls (pass-through; needs the code pack).
	Expose bool `json:"expose,omitempty"`
	// From says where the source was configured, for errors (see
	// OpenAPISource.From).
	From string `json:"-"`
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
func headers(h map[string]string) (http.Header, error) {
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
			return nil, fmt.Errorf("header %s names unset environment variable(s) %s", k, strings.Join(missing, ", "))
		}
		out.Set(k, val)
	}
	return out, nil
}

// sourceError says which source failed and where it was configured.
func sourceError(name, from string, err error) error {
	if from == "" {
		return fmt.Errorf("tool source %q: %w", name, err)
	}
	return fmt.Errorf("tool source %q (%s): %w", name, from, err)
}

// CheckSources checks the tool sources of cfg without loading or contacting
// any: each name valid and used once (the demo API's "demo" included), each
// upstream URL and base URL an absolute http(s) URL, each spec an http(s)
// URL or a file that exists, and every ${VAR} of their headers set. The
// error names the source and where it was configured; the commands report
// it as a usage error. Loading the sources (Run) checks the rest.
func CheckSources(cfg CodeConfig) error {
	seen := map[string]bool{}
	if cfg.DemoAPI {
		seen["demo"] = true
	}
	name := func(n, from string) error {
		switch {
		case !tools.ValidSourceName(n):
			return sourceError(n, from, errors.New("invalid name (want ^[a-zA-Z][a-zA-Z0-9_]*$)"))
		case seen[n]:
			return sourceError(n, from, errors.New("another tool source has this name (the demo API is \"demo\")"))
		}
		seen[n] = true
		return nil
	}
	for _, s := range cfg.OpenAPI {
		if err := name(s.Name, s.From); err != nil {
			return err
		}
		if err := checkSpec(s.Spec, s.BaseURL); err != nil {
			return sourceError(s.Name, s.From, err)
		}
		if _, err := headers(s.Headers); err != nil {
			return sourceError(s.Name, s.From, err)
		}
	}
	for _, u := range cfg.Upstreams {
		if err := name(u.Name, u.From); err != nil {
			return err
		}
		if !httpURL(u.URL) {
			return sourceError(u.Name, u.From, fmt.Errorf("URL %q is not an absolute http(s) URL", u.URL))
		}
		if _, err := headers(u.Headers); err != nil {
			return sourceError(u.Name, u.From, err)
		}
	}
	return nil
}

// checkSpec checks an OpenAPI source's spec (an http(s) URL or a file that
// exists) and base URL (empty, or an absolute http(s) URL).
func checkSpec(spec, baseURL string) error {
	switch {
	case spec == "":
		return errors.New("no spec (want a file or an http(s) URL)")
	case baseURL != "" && !httpURL(baseURL):
		return fmt.Errorf("base URL %q is not an absolute http(s) URL", baseURL)
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		if !httpURL(spec) {
			return fmt.Errorf("spec URL %q is not an absolute http(s) URL", spec)
		}
		return nil
	}
	fi, err := os.Stat(spec)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if fi.IsDir() {
		return fmt.Errorf("spec %s is a directory (want an OpenAPI document)", spec)
	}
	return nil
}

// httpURL reports whether s is an absolute http(s) URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
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

// sourceSet is the code-mode tool sources of a node; close ends what they
// started (upstream sessions, background connecting).
type sourceSet struct {
	sources   []tools.Source
	upstreams []*mcpupstream.Source
	exposed   []*mcpupstream.Source // the upstreams passed through
}

// close ends the upstream sources.
func (s *sourceSet) close() {
	for _, u := range s.upstreams {
		_ = u.Close()
	}
}

// codeSources builds the tool registry: the demo API (when served, as
// source "demo" at /demo/ on the HTTP listener), then the configured
// sources. An upstream MCP server that is unavailable (down, HTTP 5xx) is
// connected in the background; any other failure ends the build, closing
// what it started, with an error naming the source.
func codeSources(ctx context.Context, cfg CodeConfig, demoAPI *demo.API, httpAddr net.Addr, log *slog.Logger) (*tools.Registry, *sourceSet, error) {
	if err := CheckSources(cfg); err != nil {
		return nil, nil, err
	}
	set := &sourceSet{}
	if err := set.load(ctx, cfg, demoAPI, httpAddr, log); err != nil {
		set.close()
		return nil, nil, err
	}
	reg, err := tools.NewRegistry(set.sources...)
	if err != nil {
		set.close()
		return nil, nil, err
	}
	return reg, set, nil
}

// load loads every source of cfg into s, in order, up to the first failure.
func (s *sourceSet) load(ctx context.Context, cfg CodeConfig, demoAPI *demo.API, httpAddr net.Addr, log *slog.Logger) error {
	if demoAPI != nil {
		// Calls go to the API in process, with the execution's owner on
		// their context (the to-do lists are per organization).
		base := localURL(httpAddr) + "/demo"
		client, err := demoAPI.Client(base)
		if err != nil {
			return fmt.Errorf("demo source: %w", err)
		}
		src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Spec: "demo", Document: demoAPI.Spec(base), Client: client})
		if err != nil {
			return fmt.Errorf("demo source: %w", err)
		}
		s.sources = append(s.sources, src)
	}
	for _, o := range cfg.OpenAPI {
		h, err := headers(o.Headers)
		if err != nil {
			return sourceError(o.Name, o.From, err)
		}
		src, err := openapi.Load(ctx, openapi.Options{Name: o.Name, Spec: o.Spec, BaseURL: o.BaseURL, Headers: h})
		if err != nil {
			return sourceError(o.Name, o.From, err)
		}
		s.sources = append(s.sources, src)
	}
	for _, u := range cfg.Upstreams {
		h, err := headers(u.Headers)
		if err != nil {
			return sourceError(u.Name, u.From, err)
		}
		src, err := mcpupstream.New(ctx, mcpupstream.Options{Name: u.Name, Endpoint: u.URL, Headers: h,
			RetryUnavailable: true, Clock: cfg.Clock, Logger: log})
		if err != nil {
			return sourceError(u.Name, u.From, err)
		}
		s.upstreams = append(s.upstreams, src)
		s.sources = append(s.sources, src)
		if u.Expose {
			s.exposed = append(s.exposed, src)
		}
	}
	return nil
}

// register exports, for each upstream source, whether it is connected.
func (s *sourceSet) register(reg prometheus.Registerer) error {
	for _, u := range s.upstreams {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgrain_tool_source_connected",
			Help:        "Whether an upstream MCP tool source is connected (0 while it is connected in the background after failing at start).",
			ConstLabels: prometheus.Labels{"source": u.Name()},
		}, func() float64 {
			if u.Unavailable() != nil {
				return 0
			}
			return 1
		})
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("tool source %q metric: %w", u.Name(), err)
		}
	}
	return nil
}
