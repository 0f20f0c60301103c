package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// Each scenario against a real in-process node (SQLite store, go-sdk
// client over loopback HTTP), briefly: the counts must move and nothing
// may fail.
func TestScenariosAgainstAnInProcessNode(t *testing.T) {
	cases := []struct {
		sc       Scenario
		baseline bool
	}{
		{Call, true},
		{Churn, true},
		{Approve, true},
	}
	for _, tc := range cases {
		t.Run(string(tc.sc), func(t *testing.T) {
			var mu sync.Mutex
			var progress []Progress
			reports, err := Run(t.Context(), Options{
				Scenarios: []Scenario{tc.sc}, Sessions: 3, Concurrency: 2, Duration: time.Second,
				Warmup: 200 * time.Millisecond, Baseline: tc.baseline,
				ProgressEvery: 100 * time.Millisecond,
				Progress: func(p Progress) {
					mu.Lock()
					progress = append(progress, p)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(reports) != 1 {
				t.Fatalf("%d reports", len(reports))
			}
			r := reports[0]
			checkResult(t, "mcpgrain", r.Mcpgrain)
			if tc.baseline {
				if r.Baseline == nil || r.Ratios == nil {
					t.Fatalf("no baseline in %+v", r)
				}
				checkResult(t, "baseline", *r.Baseline)
				if r.Ratios.P50 <= 0 || r.Ratios.Throughput <= 0 {
					t.Fatalf("ratios %+v", *r.Ratios)
				}
			}
			finals := map[string]bool{}
			mu.Lock()
			for _, p := range progress {
				if p.Final {
					finals[p.Target+"/"+map[bool]string{true: "warmup", false: "measure"}[p.Warmup]] = true
				}
			}
			mu.Unlock()
			if !finals["mcpgrain/warmup"] || !finals["mcpgrain/measure"] || (tc.baseline && !finals["baseline/measure"]) {
				t.Fatalf("final progress reports: %v", finals)
			}
			var text bytes.Buffer
			if err := WriteText(&text, reports); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"scenario " + string(tc.sc), "mcpgrain", "p50", "ratio"} {
				if !strings.Contains(text.String(), want) {
					t.Fatalf("text report lacks %q:\n%s", want, text.String())
				}
			}
		})
	}
}

func checkResult(t *testing.T, name string, r Result) {
	t.Helper()
	if r.Requests == 0 || r.Errors != 0 || r.Throughput <= 0 || r.P50 <= 0 || r.CPUPerRequest <= 0 || r.Max < r.P99 || r.P99 < r.P90 || r.P90 < r.P50 {
		t.Fatalf("%s: %+v", name, r)
	}
}

// The restore scenario passivates and restores sessions for real: the
// node's own counters show cold restores and cap evictions.
func TestRestoreScenarioRestoresSessions(t *testing.T) {
	reports, err := Run(t.Context(), Options{
		Scenarios: []Scenario{Restore}, Sessions: 6, Concurrency: 1, RestoreCap: 2, Requests: 60, Baseline: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	if r.Restores == nil {
		t.Fatalf("no restore counters: %s", r.RestoreNote)
	}
	if r.Mcpgrain.Requests != 60 || r.Restores.Activations < 1 || r.Restores.CapDisposals < 1 {
		t.Fatalf("requests %d, restores %+v", r.Mcpgrain.Requests, *r.Restores)
	}
	if r.Baseline != nil || r.BaselineNote == "" {
		t.Fatalf("restore has no baseline, but got %+v / %q", r.Baseline, r.BaselineNote)
	}
	// Every request succeeds. (A request that reached a session right
	// after its cap eviction used to fail with 404 "session not found":
	// the eviction closed the runtime under a POST whose handler had not
	// started yet. The session now counts POSTs from the turn that starts
	// them, and a passivating activation sends callers to the next one.)
	if r.Mcpgrain.Errors != 0 || r.Mcpgrain.SetupRetries != 0 {
		t.Fatalf("%d of %d requests failed, %d session re-opens: %v", r.Mcpgrain.Errors, r.Mcpgrain.Requests, r.Mcpgrain.SetupRetries, r.Mcpgrain.ErrorSamples)
	}
}

// A target that is not there is an error, not a report of failures.
func TestUnreachableTargetFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := Run(ctx, Options{URL: "http://127.0.0.1:1/mcp", Requests: 1, Sessions: 1})
	if err == nil || !strings.Contains(err.Error(), "open 1 sessions") {
		t.Fatalf("err = %v", err)
	}
}

func TestJSONReport(t *testing.T) {
	reports := []Report{{Scenario: Restore, Target: "t", Sessions: 2, Concurrency: 1, Requests: 5,
		Mcpgrain: Result{Requests: 5, Throughput: 10, P50: time.Millisecond}, BaselineNote: noRestoreBaseline,
		Restores: &Restores{Activations: 5, CapDisposals: 4}}}
	var b bytes.Buffer
	if err := WriteJSON(&b, reports); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Reports []struct {
			Scenario string             `json:"scenario"`
			Mcpgrain map[string]any     `json:"mcpgrain"`
			Restores map[string]float64 `json:"restores"`
			Note     string             `json:"baselineNote"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	g := got.Reports[0]
	if g.Scenario != "restore" || g.Mcpgrain["p50Ns"] != float64(time.Millisecond) || g.Restores["activations"] != 5 || g.Note == "" {
		t.Fatalf("JSON report %s", b.String())
	}
}

// The overload scenario against an in-process node, briefly: a capacity,
// then one step per multiple in which every request sent has an outcome
// and the lightest load is served.
func TestOverloadScenarioRecordsACurve(t *testing.T) {
	reports, err := Run(t.Context(), Options{Scenarios: []Scenario{Overload}, Sessions: 2, Concurrency: 2, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	or := reports[0].Overload
	if or == nil || or.Capacity <= 0 || len(or.Steps) != len(OverloadMultiples) {
		t.Fatalf("overload report %+v", or)
	}
	for i, s := range or.Steps {
		if s.Multiple != OverloadMultiples[i] || s.Sent != s.Served+s.Shed+s.Failed || s.Offered <= 0 {
			t.Errorf("step %d: %+v", i, s)
		}
	}
	if or.Steps[0].Served == 0 {
		t.Errorf("nothing served at %gx: %+v", or.Steps[0].Multiple, or.Steps[0])
	}
	var b bytes.Buffer
	if err := WriteText(&b, reports); err != nil || !strings.Contains(b.String(), "0.5x") || !strings.Contains(b.String(), "capacity:") {
		t.Fatalf("text report (%v):\n%s", err, b.String())
	}
}
