package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "Load-tests an MCP endpoint with the go-sdk client and prints latency percentiles, throughput and errors per scenario.\n"+
		"Without --url it starts a single node in this process (as mcpgrain dev does) for each scenario.\n"+
		"Scenarios: call (tools/call round trips), churn (initialize + call + DELETE), restore (calls that force cold restores), approve (execute → approve → resume);\n"+
		"scale (creates --scale-sessions sessions over raw Streamable HTTP, then revisits random ones, warm and cold apart; only when named, not part of all).", stderr)
	url := fs.String("url", "", "MCP endpoint under load, e.g. http://127.0.0.1:8080/mcp (default: an in-process node); scale takes a comma-separated list, one URL per node, and spreads sessions over it")
	token := fs.String("token", "", "bearer token for --url (ignored without --url: the in-process node generates one)")
	scenarios := fs.String("scenario", "call", "scenarios to run: call, churn, restore, approve, scale, a comma-separated list, or all (all but scale)")
	sessions := fs.Int("sessions", bench.DefaultSessions, "MCP sessions opened up front (call, restore, approve)")
	concurrency := fs.Int("concurrency", bench.DefaultConcurrency, "concurrent workers issuing requests")
	duration := fs.Duration("duration", 10*time.Second, "length of each measured phase (0: only --requests ends it)")
	requests := fs.Int("requests", 0, "end each measured phase after this many requests (0: only --duration ends it)")
	warmup := fs.Duration("warmup", time.Second, "load run before measuring, not counted (0: none)")
	baseline := fs.Bool("baseline", false, "also run each scenario against a plain go-sdk server in this process and print mcpgrain/baseline ratios")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	restoreCap := fs.Int("restore-cap", bench.DefaultRestoreCap, "resident soft cap of the in-process node in the restore scenario (must be below --sessions)")
	scaleSessions := fs.Int("scale-sessions", bench.DefaultScaleSessions, "sessions the scale scenario creates (--duration and --requests bound its revisits; --warmup does not apply)")
	scaleBaseline := fs.Int("scale-baseline-sessions", 0, "sessions the scale scenario creates on the plain go-sdk server with --baseline (0: as many as --scale-sessions)")
	scaleRevisit := fs.String("scale-revisit", "echo", "what a scale revisit sends: echo (tools/call of the demo echo tool) or ping")
	scaleStore := fs.String("scale-store", "", "store the scale scenario measures for bytes per session and the reminder backlog: sqlite:PATH or postgres://… (default: the in-process node's own; none with --url)")
	scaleMemory := fs.String("scale-resident-memory", "auto", "memory budget of the in-process node's resident runtimes in the scale scenario, from which it derives its soft cap, as mcpgrain node --resident-memory (auto: half the cgroup's or machine's memory)")
	timeout := fs.Duration("timeout", bench.DefaultRequestTimeout, "longest one request may take before it counts as an error")
	nodeLog := fs.String("node-log-level", "", "log level of the in-process node's log on stderr: debug, info, warn, error (default: no log)")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of this process (client, in-process node and baseline) to this file")
	progress := fs.Bool("progress", isTerminal(stderr), "draw a progress bar on stderr (default when stderr is a terminal; otherwise one progress line every 2s)")
	serveBaseline := fs.String("serve-baseline", "", "instead of benchmarking, serve the plain go-sdk baseline server (demo pack and code mode) on this address until interrupted, to load it from another process — e.g. pinned to cores of its own like the nodes it is compared with (127.0.0.1:0 picks a port)")
	addSecretFiles(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *serveBaseline != "" {
		return bench.ServeBaseline(ctx, *serveBaseline, func(u string) { fmt.Fprintf(stdout, "plain go-sdk baseline: %s (Ctrl-C stops it)\n", u) })
	}
	if err := resolveSecrets(fs, stderr, "bench", true); err != nil {
		return err
	}
	scs, err := bench.ParseScenarios(*scenarios)
	if err != nil {
		return fmt.Errorf("%w: --scenario: %v", errUsage, err)
	}
	if *url == "" {
		*token = "" // the in-process node makes its own (MCPGRAIN_TOKEN may be set for dev)
	}
	switch {
	case *timeout <= 0:
		return fmt.Errorf("%w: --timeout must be positive", errUsage)
	case *sessions < 1 || *concurrency < 1:
		return fmt.Errorf("%w: --sessions and --concurrency must be at least 1", errUsage)
	case *duration < 0 || *warmup < 0 || *requests < 0:
		return fmt.Errorf("%w: --duration, --warmup and --requests must not be negative", errUsage)
	case *duration == 0 && *requests == 0:
		return fmt.Errorf("%w: --duration 0 needs --requests (something must end the run)", errUsage)
	case *restoreCap < 1:
		return fmt.Errorf("%w: --restore-cap must be at least 1", errUsage)
	case *scaleSessions < 1 || *scaleBaseline < 0:
		return fmt.Errorf("%w: --scale-sessions must be at least 1 and --scale-baseline-sessions not negative", errUsage)
	}
	scaleBudget, err := app.ParseResidentMemory(*scaleMemory)
	if err != nil || scaleBudget == 0 && *scaleMemory != "auto" {
		return fmt.Errorf("%w: --scale-resident-memory %q: want a size such as 4GiB, or auto", errUsage, *scaleMemory)
	}
	var nodeLogger *slog.Logger
	if *nodeLog != "" {
		level, err := parseLevel(*nodeLog)
		if err != nil {
			return fmt.Errorf("%w: --node-log-level: %v", errUsage, err)
		}
		nodeLogger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	}
	o := bench.Options{
		URL: *url, Token: *token, Scenarios: scs, Sessions: *sessions, Concurrency: *concurrency,
		Duration: *duration, Requests: *requests, Warmup: *warmup, Baseline: *baseline,
		RestoreCap: *restoreCap, RequestTimeout: *timeout, NodeLogger: nodeLogger,
		Scale: bench.ScaleOptions{Sessions: *scaleSessions, BaselineSessions: *scaleBaseline, Revisit: bench.Revisit(*scaleRevisit),
			Store: *scaleStore, ResidentMemory: scaleBudget},
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var mu sync.Mutex
	if *progress {
		o.ProgressEvery = 200 * time.Millisecond
		o.Progress = func(p bench.Progress) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprint(stderr, bench.FormatProgress(p, true))
			if p.Final {
				fmt.Fprintln(stderr)
			}
		}
	} else {
		o.ProgressEvery = 2 * time.Second
		o.Progress = func(p bench.Progress) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(stderr, bench.FormatProgress(p, false))
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("%w: --cpu-profile: %v", errUsage, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	reports, err := bench.Run(ctx, o)
	if len(reports) > 0 {
		var werr error
		if *asJSON {
			werr = bench.WriteJSON(stdout, reports)
		} else {
			werr = bench.WriteText(stdout, reports)
		}
		if err == nil {
			err = werr
		}
	}
	return err
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
