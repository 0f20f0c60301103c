package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
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
	switch r.Scenario {
	case Scale:
		writeScale(b, r)
		return
	case Overload:
		writeOverload(b, r)
		return
	}
	sessions := fmt.Sprintf("%d sessions, ", r.Sessions)
	if r.Scenario == Churn {
		sessions = ""
	}
	fmt.Fprintf(b, "scenario %s — %s · %s%d workers · %s\n", r.Scenario, describe(r.Scenario), sessions, r.Concurrency, limitText(r))
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
		b.WriteString(ratioNote)
	}
	if r.External {
		b.WriteString(externalNote)
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

// limitText is what ends a report's measured phase.
func limitText(r Report) string {
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
	return limit
}

// ratioNote explains a ratio row.
const ratioNote = "(ratio = mcpgrain / plain go-sdk: latency or cpu/req above 1× costs more, req/s below 1× serves fewer; cpu/req is this whole process, client included)\n"

// externalNote says whose CPU cpu/req is against a URL.
const externalNote = "(mcpgrain runs elsewhere: its cpu/req counts only this client)\n"

// writeScale writes a scale report: creation (with the baseline), the
// revisits warm and cold, errors by kind, the nodes and the store.
func writeScale(b *strings.Builder, r Report) {
	fmt.Fprintf(b, "scenario %s — %s · %d sessions, %d workers · revisits: %s\n", r.Scenario, describe(r.Scenario), r.Sessions, r.Concurrency, limitText(r))
	fmt.Fprintf(b, "target: %s\n", r.Target)
	sr := r.Scale
	if sr == nil {
		sr = &ScaleReport{}
	}
	writeScaleCreation(b, r)
	if sr.CreateRestores > 0 {
		fmt.Fprintf(b, "%d sessions were passivated between initialize and notifications/initialized, which restored them cold (included above)\n", sr.CreateRestores)
	}
	if sr.Revisits.Requests > 0 {
		writeScaleRevisits(b, sr)
	}
	if r.External {
		b.WriteString(externalNote)
	}
	writeKinds(b, "create, mcpgrain", sr.CreateErrors, r.Mcpgrain.ErrorSamples)
	writeKinds(b, "revisit", sr.RevisitErrors, sr.Revisits.ErrorSamples)
	if r.Baseline != nil {
		writeKinds(b, "create, plain go-sdk", sr.BaselineCreateErrors, r.Baseline.ErrorSamples)
	}
	if len(sr.Snapshots) > 0 {
		writeScaleNodes(b, sr, r.External)
		writeRSSSeries(b, sr)
		writeStore(b, sr)
	}
	if sr.BaselineHeapPerSession > 0 {
		fmt.Fprintf(b, "plain go-sdk keeps every session in memory: live heap +%s per session created (this process after a GC)\n", formatBytes(sr.BaselineHeapPerSession))
	}
}

// scaleRow writes one row of a scale table (errs: the errors column,
// empty for x's count).
func scaleRow(tw *tabwriter.Writer, name string, x Result, errs string) {
	if errs == "" {
		errs = fmt.Sprint(x.Errors)
	}
	fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", name, x.Requests, errs, x.Throughput,
		FormatDuration(x.P50), FormatDuration(x.P90), FormatDuration(x.P99), FormatDuration(x.Max), FormatDuration(x.CPUPerRequest))
}

// writeScaleCreation writes the creation table, with the baseline and
// the ratios.
func writeScaleCreation(b *strings.Builder, r Report) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "creation\tsessions\terrors\tsessions/s\tp50\tp90\tp99\tmax\tcpu/session\t")
	scaleRow(tw, "mcpgrain", r.Mcpgrain, "")
	if r.Baseline != nil {
		scaleRow(tw, "plain go-sdk", *r.Baseline, "")
	}
	if x := r.Ratios; x != nil {
		fmt.Fprintf(tw, "ratio\t\t\t%s\t%s\t%s\t%s\t%s\t%s\t\n", FormatRatio(x.Throughput), FormatRatio(x.P50), FormatRatio(x.P90), FormatRatio(x.P99), FormatRatio(x.Max), FormatRatio(x.CPU))
	}
	_ = tw.Flush()
	if r.Ratios != nil {
		b.WriteString("(ratio = mcpgrain / plain go-sdk: latency or cpu/session above 1× costs more, sessions/s below 1× creates fewer; cpu/session is this whole process, client included)\n")
	}
}

// writeScaleRevisits writes the revisits table, all, warm and cold.
func writeScaleRevisits(b *strings.Builder, sr *ScaleReport) {
	what := "tools/call echo"
	if sr.Revisit == RevisitPing {
		what = "ping"
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "revisits (%s)\trequests\terrors\treq/s\tp50\tp90\tp99\tmax\tcpu/req\t\n", what)
	scaleRow(tw, "all", sr.Revisits, "")
	scaleRow(tw, "warm", sr.Warm, "-")
	scaleRow(tw, "cold", sr.Cold, "-")
	_ = tw.Flush()
	fmt.Fprintf(b, "cold restores: %.1f%% of the successful revisits (%d answers with Mcpgrain-Restored: 1, %d warm); a revisit goes to %s through a random URL (of %d)\n",
		100*sr.ColdFraction, sr.Cold.Requests, sr.Warm.Requests, revisitPick(sr), len(sr.URLs))
	if sr.RestoresPerSecond > 0 || sr.NodeActivations != 0 {
		fmt.Fprintf(b, "restores: %.1f/s answered cold", sr.RestoresPerSecond)
		if sr.NodeActivations >= 0 && sr.Revisits.Elapsed > 0 {
			fmt.Fprintf(b, "; runtimes built by the nodes meanwhile: %.0f (%.1f/s)", sr.NodeActivations, sr.NodeActivations/sr.Revisits.Elapsed.Seconds())
		}
		b.WriteString("\n")
	}
}

// revisitPick says how a revisit picked its session.
func revisitPick(sr *ScaleReport) string {
	var what string
	switch sr.Distribution {
	case DistZipf:
		what = fmt.Sprintf("a session drawn from Zipf(s=%g, v=%g) over the %d sessions (hottest first in a seeded shuffle, seed %d)", sr.ZipfS, sr.ZipfV, sr.Created, sr.Seed)
	default:
		what = fmt.Sprintf("a random session (of %d)", sr.Created)
	}
	if sr.Distinct > 0 {
		what += fmt.Sprintf(", %d distinct revisited", sr.Distinct)
	}
	return what
}

// writeScaleNodes writes the nodes' snapshots (external: the nodes run
// in other processes), then the resident sessions at the end.
func writeScaleNodes(b *strings.Builder, sr *ScaleReport, external bool) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\twhen\trss\tresident\tsoft cap\tper runtime\tbudget\tinitialize 200\tactivations\tcap evictions\tidle passivations\t")
	var failed []string
	for _, snap := range sr.Snapshots {
		for _, n := range snap.Nodes {
			if n.Error != "" {
				failed = append(failed, fmt.Sprintf("node %s %s: %s\n", n.Node, snap.Phase, n.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t\n", n.Node, snap.Phase, formatBytes(n.RSS), n.Resident, n.SoftCap,
				formatBytes(n.RuntimeBytes), formatBytes(n.MemoryBudget), n.Initializes, n.Activations, n.CapEvictions, n.IdleDisposals)
		}
	}
	_ = tw.Flush()
	b.WriteString(strings.Join(failed, ""))
	if !external {
		b.WriteString("(in-process node: rss is this whole process, client included)\n")
	}
	last := sr.Snapshots[len(sr.Snapshots)-1]
	unseen := 0
	for _, n := range last.Nodes {
		if n.Error != "" {
			unseen++
		}
	}
	fmt.Fprintf(b, "resident sessions at the end: %.0f across %s", sr.Resident, plural(len(last.Nodes)-unseen, "node"))
	if unseen > 0 {
		fmt.Fprintf(b, " (%s not scraped)", plural(unseen, "node"))
	}
	b.WriteString("\n")
}

// writeKinds writes the errors of one phase by kind, most frequent first,
// then their first distinct messages.
func writeKinds(b *strings.Builder, phase string, kinds map[string]int, samples []string) {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int {
		if kinds[x] != kinds[y] {
			return kinds[y] - kinds[x]
		}
		return strings.Compare(x, y)
	})
	for _, k := range names {
		fmt.Fprintf(b, "errors (%s): %d × %s\n", phase, kinds[k], k)
	}
	for _, e := range samples {
		fmt.Fprintf(b, "error (%s): %s\n", phase, e)
	}
}

// writeStore writes the store's size at each snapshot, its growth per
// session created and its rows at the end.
func writeStore(b *strings.Builder, sr *ScaleReport) {
	var sizes []string
	var last *StoreSample
	for _, snap := range sr.Snapshots {
		switch st := snap.Store; {
		case st == nil:
			return
		case st.Error != "":
			sizes = append(sizes, snap.Phase+" failed: "+st.Error)
		default:
			sizes = append(sizes, formatBytes(float64(st.Bytes))+" "+snap.Phase)
			last = st
		}
	}
	fmt.Fprintf(b, "store %s: %s", sr.Store, strings.Join(sizes, " → "))
	if sr.StoreBytesPerSession > 0 {
		fmt.Fprintf(b, "; %s per session created", formatBytes(sr.StoreBytesPerSession))
	}
	b.WriteString("\n")
	if last != nil {
		fmt.Fprintf(b, "store rows at the end: %d sessions, %d reminders (%d due and not fired)\n", last.Sessions, last.Reminders, last.Due)
	}
}

// plural is "1 node", "2 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatBytes renders a byte count in binary units ("-" for none).
func formatBytes(v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "-"
	}
	return humanize.IBytes(uint64(v))
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
	case Scale:
		return "sessions created over raw Streamable HTTP, then random ones revisited"
	case Overload:
		return "open-loop echo calls at multiples of the closed-loop capacity"
	}
	return string(sc)
}

// FormatProgress renders a progress snapshot as one line. With bar it is
// a progress bar meant to be redrawn in place (prefixed by "\r"), else a
// plain log line.
func FormatProgress(p Progress, bar bool) string {
	p.Fraction = min(max(p.Fraction, 0), 1)
	phase, unit := "measure", "req"
	switch {
	case p.Phase != "":
		phase = p.Phase
		if p.Phase == phaseCreate {
			unit = "sessions"
		}
	case p.Warmup:
		phase = "warm-up"
	}
	rate := 0.0
	if p.Elapsed > 0 {
		rate = float64(p.Done-p.Errors) / p.Elapsed.Seconds()
	}
	stats := fmt.Sprintf("%s %s %s: %d %s, %d err, %.0f %s/s, %s", p.Scenario, p.Target, phase, p.Done, unit, p.Errors, rate, unit, p.Elapsed.Round(100*time.Millisecond))
	if !bar {
		return fmt.Sprintf("bench: %s (%.0f%%)", stats, 100*p.Fraction)
	}
	const width = 24
	filled := int(math.Round(p.Fraction * width))
	return fmt.Sprintf("\r[%s%s] %3.0f%% %s\x1b[K", strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*p.Fraction, stats)
}

// writeOverload writes the overload curve: the closed-loop capacity, then
// per open-loop load what was offered, served and shed, the latencies of
// the admitted requests and of the shed answers, and the node's memory.
func writeOverload(b *strings.Builder, r Report) {
	fmt.Fprintf(b, "scenario %s — %s · %d sessions · capacity: %d closed-loop workers · %s per load\n",
		r.Scenario, describe(r.Scenario), r.Sessions, r.Concurrency, limitText(r))
	fmt.Fprintf(b, "target: %s\n", r.Target)
	or := r.Overload
	if or == nil {
		or = &OverloadReport{}
	}
	fmt.Fprintf(b, "capacity: %.0f req/s (p50 %s, p99 %s, %d errors)", or.Capacity, FormatDuration(r.Mcpgrain.P50), FormatDuration(r.Mcpgrain.P99), r.Mcpgrain.Errors)
	if or.MemoryLimit > 0 {
		fmt.Fprintf(b, " · GOMEMLIMIT %s", formatBytes(float64(or.MemoryLimit)))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\toffered/s\tserved/s\tsent\tserved\tshed\tfailed\tp50\tp99\tmax\tshed p50\tshed p99\tshed max\tmax RSS\tmax heap\t")
	for _, s := range or.Steps {
		fmt.Fprintf(tw, "%gx\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Multiple, s.Offered, s.ServedRate,
			s.Sent, s.Served, s.Shed, s.Failed+s.Overrun,
			FormatDuration(s.Admitted.P50), FormatDuration(s.Admitted.P99), FormatDuration(s.Admitted.Max),
			FormatDuration(s.ToShed.P50), FormatDuration(s.ToShed.P99), FormatDuration(s.ToShed.Max),
			formatBytes(s.MaxRSS), formatBytes(s.MaxHeap))
	}
	_ = tw.Flush()
	b.WriteString("(p50/p99/max: admitted requests; shed: time to the 503 + Retry-After answer; failed: errors, timeouts and arrivals the client could not send)\n")
	for _, s := range or.Steps {
		for _, f := range s.FailureSamples {
			fmt.Fprintf(b, "  %gx failed: %s\n", s.Multiple, f)
		}
	}
}
