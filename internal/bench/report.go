package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// MarshalJSON writes a ratio with no data (NaN) as null.
func (r Ratios) MarshalJSON() ([]byte, error) {
	f := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		v = math.Round(v*1000) / 1000
		return &v
	}
	return json.Marshal(map[string]*float64{"p50": f(r.P50), "p90": f(r.P90), "p99": f(r.P99), "max": f(r.Max), "throughput": f(r.Throughput), "cpu": f(r.CPU)})
}

// WriteJSON writes the reports as one JSON document {"reports": [...]}.
func WriteJSON(w io.Writer, reports []Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"reports": reports}); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// WriteText writes the reports as tables, one per scenario.
func WriteText(w io.Writer, reports []Report) error {
	var b strings.Builder
	for i, r := range reports {
		if i > 0 {
			b.WriteString("\n")
		}
		writeReport(&b, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeReport(b *strings.Builder, r Report) {
	limit := ""
	switch {
	case r.Duration > 0 && r.Requests > 0:
		limit = fmt.Sprintf("%s or %d requests", r.Duration, r.Requests)
	case r.Duration > 0:
		limit = r.Duration.String()
	default:
		limit = fmt.Sprintf("%d requests", r.Requests)
	}
	if r.Warmup > 0 {
		limit += fmt.Sprintf(" (after %s warm-up)", r.Warmup)
	}
	sessions := fmt.Sprintf("%d sessions, ", r.Sessions)
	if r.Scenario == Churn {
		sessions = ""
	}
	fmt.Fprintf(b, "scenario %s — %s · %s%d workers · %s\n", r.Scenario, describe(r.Scenario), sessions, r.Concurrency, limit)
	fmt.Fprintf(b, "target: %s\n", r.Target)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\trequests\terrors\treq/s\tp50\tp90\tp99\tmax\tcpu/req\t")
	row := func(name string, x Result) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", name, x.Requests, x.Errors, x.Throughput,
			FormatDuration(x.P50), FormatDuration(x.P90), FormatDuration(x.P99), FormatDuration(x.Max), FormatDuration(x.CPUPerRequest))
	}
	row("mcpgrain", r.Mcpgrain)
	if r.Baseline != nil {
		row("plain go-sdk", *r.Baseline)
	}
	if r.Ratios != nil {
		x := r.Ratios
		fmt.Fprintf(tw, "ratio\t\t\t%s\t%s\t%s\t%s\t%s\t%s\t\n", FormatRatio(x.Throughput), FormatRatio(x.P50), FormatRatio(x.P90), FormatRatio(x.P99), FormatRatio(x.Max), FormatRatio(x.CPU))
	}
	_ = tw.Flush()
	if r.Ratios != nil {
		b.WriteString("(ratio = mcpgrain / plain go-sdk: latency or cpu/req above 1× costs more, req/s below 1× serves fewer; cpu/req is this whole process, client included)\n")
	}
	if r.External {
		b.WriteString("(mcpgrain runs elsewhere: its cpu/req counts only this client)\n")
	}
	if r.BaselineNote != "" {
		fmt.Fprintf(b, "baseline: n/a — %s\n", r.BaselineNote)
	}
	if r.Restores != nil {
		fmt.Fprintf(b, "restores: %.0f cold restores (session activations), %.0f cap evictions, %.0f idle passivations during the measured phase\n",
			r.Restores.Activations, r.Restores.CapDisposals, r.Restores.IdleDisposals)
	}
	if r.RestoreNote != "" {
		fmt.Fprintf(b, "%s\n", r.RestoreNote)
	}
	errLines := func(name string, x Result) {
		if x.SetupRetries > 0 {
			fmt.Fprintf(b, "setup (%s): %d session initializations failed and were retried before the run\n", name, x.SetupRetries)
		}
		for _, e := range x.ErrorSamples {
			fmt.Fprintf(b, "error (%s): %s\n", name, e)
		}
	}
	errLines("mcpgrain", r.Mcpgrain)
	if r.Baseline != nil {
		errLines("plain go-sdk", *r.Baseline)
	}
}

func describe(sc Scenario) string {
	switch sc {
	case Call:
		return "tools/call echo round trips"
	case Churn:
		return "initialize + echo + DELETE per request"
	case Restore:
		return "echo round-robin over more sessions than the soft cap (cold restores)"
	case Approve:
		return "execute (pauses) + HTTP approve + resume per request"
	}
	return string(sc)
}

// FormatProgress renders a progress snapshot as one line. With bar it is
// a progress bar meant to be redrawn in place (prefixed by "\r"), else a
// plain log line.
func FormatProgress(p Progress, bar bool) string {
	p.Fraction = min(max(p.Fraction, 0), 1)
	phase := "measure"
	if p.Warmup {
		phase = "warm-up"
	}
	rate := 0.0
	if p.Elapsed > 0 {
		rate = float64(p.Done-p.Errors) / p.Elapsed.Seconds()
	}
	stats := fmt.Sprintf("%s %s %s: %d req, %d err, %.0f req/s, %s", p.Scenario, p.Target, phase, p.Done, p.Errors, rate, p.Elapsed.Round(100*time.Millisecond))
	if !bar {
		return fmt.Sprintf("bench: %s (%.0f%%)", stats, 100*p.Fraction)
	}
	const width = 24
	filled := int(math.Round(p.Fraction * width))
	return fmt.Sprintf("\r[%s%s] %3.0f%% %s\x1b[K", strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*p.Fraction, stats)
}
