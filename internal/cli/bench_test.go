package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBenchCommandLineErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario", []string{"--scenario", "call,nap"}, `unknown scenario "nap"`},
		{"no end", []string{"--duration", "0"}, "--duration 0 needs --requests"},
		{"no sessions", []string{"--sessions", "0"}, "--sessions and --concurrency must be at least 1"},
		{"negative warmup", []string{"--warmup", "-1s"}, "must not be negative"},
		{"restore cap above sessions", []string{"--scenario", "restore", "--sessions", "4", "--restore-cap", "4"}, "more sessions (4) than the node's soft cap (4)"},
		{"bad duration", []string{"--duration", "soon"}, `invalid value "soon" for flag -duration`},
		{"stray argument", []string{"call"}, `unexpected argument "call"`},
		{"bad node log level", []string{"--node-log-level", "loud"}, `unknown level "loud"`},
		{"bad url", []string{"--url", "127.0.0.1:8080", "--requests", "1"}, "want an http(s) URL"},
		{"several urls for call", []string{"--url", "http://a/mcp,http://b/mcp"}, "the call scenario drives one URL, not 2"},
		{"unknown revisit", []string{"--scenario", "scale", "--scale-revisit", "pong"}, `unknown revisit "pong" (want echo or ping)`},
		{"no scale sessions", []string{"--scenario", "scale", "--scale-sessions", "0"}, "--scale-sessions must be at least 1"},
		{"no scale memory", []string{"--scenario", "scale", "--scale-resident-memory", "0"}, `--scale-resident-memory "0": want a size such as 4GiB, or auto`},
		{"unknown distribution", []string{"--scenario", "scale", "--scale-distribution", "pareto"}, `unknown distribution "pareto" (want uniform or zipf)`},
		{"flat zipf", []string{"--scenario", "scale", "--scale-distribution", "zipf", "--scale-zipf-s", "1"}, "zipf needs s > 1 and v ≥ 1 (got s=1, v=1)"},
		{"bad scale store", []string{"--scenario", "scale", "--scale-store", "mysql://db"}, `store "mysql://db": want sqlite:PATH or postgres://`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"bench"}, tc.args...), &out, &errOut)
			wantCode := 2
			if tc.name == "bad url" {
				wantCode = 1 // a well-formed flag naming an unusable target
			}
			if code != wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, wantCode, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", errOut.String(), tc.want)
			}
		})
	}
}

// `mcpgrain bench` end to end: an in-process node, a short call run with
// the baseline, JSON on stdout and plain progress lines on stderr (not a
// terminal).
func TestBenchCommandRuns(t *testing.T) {
	// A token meant for `mcpgrain dev` in the environment does not get in
	// the way of the in-process node.
	t.Setenv("MCPGRAIN_TOKEN", "mcpg_some_dev_token_0123456789")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--scenario", "call", "--sessions", "2", "--concurrency", "2", "--requests", "40", "--duration", "0",
		"--warmup", "0", "--baseline", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	var got struct {
		Reports []struct {
			Scenario string `json:"scenario"`
			Mcpgrain struct {
				Requests, Errors int
			} `json:"mcpgrain"`
			Baseline *struct {
				Requests, Errors int
			} `json:"baseline"`
			Ratios map[string]*float64 `json:"ratios"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out.String())
	}
	if len(got.Reports) != 1 {
		t.Fatalf("reports: %s", out.String())
	}
	r := got.Reports[0]
	if r.Scenario != "call" || r.Mcpgrain.Requests != 40 || r.Mcpgrain.Errors != 0 || r.Baseline == nil || r.Baseline.Requests != 40 || r.Baseline.Errors != 0 ||
		r.Ratios["p50"] == nil || r.Ratios["throughput"] == nil {
		t.Fatalf("report: %s", out.String())
	}
	if !strings.Contains(errOut.String(), "bench: call mcpgrain measure: 40 req, 0 err") || strings.Contains(errOut.String(), "\r") {
		t.Fatalf("stderr should hold plain progress lines:\n%q", errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"bench", "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "--baseline") && !strings.Contains(errOut.String(), "-baseline") {
		t.Fatalf("help: exit %d\n%s", code, errOut.String())
	}
}

// `mcpgrain bench --scenario scale` end to end, briefly: the flags reach
// the scenario, JSON on stdout, progress lines on stderr.
func TestBenchScaleCommandRuns(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--scenario", "scale", "--scale-sessions", "20", "--scale-revisit", "ping", "--scale-resident-memory", "1MiB",
		"--scale-distribution", "zipf", "--scale-zipf-s", "2", "--scale-seed", "3", "--concurrency", "2", "--requests", "10", "--duration", "0", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	var got struct {
		Reports []struct {
			Scenario string `json:"scenario"`
			Sessions int    `json:"sessions"`
			Mcpgrain struct {
				Requests, Errors int
			} `json:"mcpgrain"`
			Scale struct {
				Revisit      string  `json:"revisit"`
				Distribution string  `json:"distribution"`
				ZipfS        float64 `json:"zipfS"`
				Seed         uint64  `json:"seed"`
				Distinct     int     `json:"distinctRevisited"`
				RSSSamples   []struct {
					Phase string  `json:"phase"`
					RSS   float64 `json:"rssBytes"`
				} `json:"rssSamples"`
				Created   int `json:"created"`
				Revisits  struct{ Requests, Errors int }
				Snapshots []struct {
					Nodes []struct {
						MemoryBudget float64 `json:"memoryBudgetBytes"`
					} `json:"nodes"`
				} `json:"snapshots"`
			} `json:"scale"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out.String())
	}
	if len(got.Reports) != 1 {
		t.Fatalf("reports: %s", out.String())
	}
	r := got.Reports[0]
	if r.Scenario != "scale" || r.Sessions != 20 || r.Mcpgrain.Requests != 20 || r.Mcpgrain.Errors != 0 || r.Scale.Created != 20 || r.Scale.Revisit != "ping" ||
		r.Scale.Revisits.Requests != 10 || r.Scale.Revisits.Errors != 0 || len(r.Scale.Snapshots) != 3 || r.Scale.Snapshots[0].Nodes[0].MemoryBudget != 1<<20 ||
		r.Scale.Distribution != "zipf" || r.Scale.ZipfS != 2 || r.Scale.Seed != 3 || r.Scale.Distinct < 1 || r.Scale.Distinct > 10 ||
		len(r.Scale.RSSSamples) < 3 || r.Scale.RSSSamples[0].Phase != "before" || r.Scale.RSSSamples[0].RSS <= 0 {
		t.Fatalf("report: %s", out.String())
	}
	for _, want := range []string{"bench: scale mcpgrain create: 20 sessions, 0 err", "bench: scale mcpgrain revisit: 10 req, 0 err"} {
		if !strings.Contains(errOut.String(), want) {
			t.Fatalf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

// bench --serve-baseline serves the plain go-sdk server the benchmarks
// compare with, in a process of its own, until interrupted: an MCP client
// finds the demo pack and code mode there.
func TestBenchServesTheBaselineOnItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runBench(ctx, []string{"--serve-baseline", "127.0.0.1:0"}, pw, io.Discard)
		pw.CloseWithError(err)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	_, rest, ok := strings.Cut(line, "plain go-sdk baseline: ")
	if !ok {
		cancel()
		t.Fatalf("no address printed: %q (%v)", line, err)
	}
	url, _, _ := strings.Cut(rest, " ")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	_ = cs.Close()
	if !slices.Contains(names, "echo") || !slices.Contains(names, "execute") {
		t.Fatalf("baseline tools %v, want echo (demo) and execute (code mode)", names)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serving ended with %v, want nil once interrupted", err)
	}
}
