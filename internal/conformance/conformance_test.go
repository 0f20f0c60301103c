package conformance_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/conformance"
)

// writeResult writes a scenario's checks.json the way the suite does.
func writeResult(t *testing.T, dir, scenario, checks string) {
	t.Helper()
	d := filepath.Join(dir, "server-"+scenario+"-2026-12-02T01-02-03-456Z")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadResultsKeepsEachChecksWorstStatus(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "server-stateless", `[
		{"id": "a", "status": "SUCCESS"},
		{"id": "a", "status": "FAILURE", "errorMessage": "id 301 got null"},
		{"id": "a", "status": "SUCCESS"},
		{"id": "b", "status": "WARNING"},
		{"id": "b", "status": "SUCCESS"},
		{"id": "c", "status": "SKIPPED"},
		{"id": "d", "status": "INFO"}
	]`)
	writeResult(t, dir, "tools-list", `[{"id": "tools-list", "status": "SUCCESS"}]`)
	// A scenario skipped as not applicable has a directory and no checks.
	if err := os.MkdirAll(filepath.Join(dir, "server-caching-2026-12-02T01-02-03-456Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "suite.log"), []byte("log"), 0o644); err != nil {
		t.Fatal(err)
	}
	checks, err := conformance.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range checks {
		got = append(got, c.Key()+"="+c.Status)
	}
	want := []string{"server-stateless:a=FAILURE", "server-stateless:b=WARNING", "server-stateless:c=SKIPPED", "tools-list:tools-list=SUCCESS"}
	if !slices.Equal(got, want) {
		t.Fatalf("checks = %q, want %q", got, want)
	}
	if checks[0].ErrorMessage != "id 301 got null" {
		t.Errorf("the worst report's message was not kept: %q", checks[0].ErrorMessage)
	}

	writeResult(t, dir, "broken", `{"not": "a list"}`)
	if _, err := conformance.ReadResults(dir); err == nil {
		t.Error("a malformed checks.json was accepted")
	}
}

func TestJudge(t *testing.T) {
	checks := []conformance.Check{
		{Scenario: "s", ID: "pass", Status: conformance.Success},
		{Scenario: "s", ID: "fail", Status: conformance.Failure},
		{Scenario: "s", ID: "warn", Status: conformance.Warning},
		{Scenario: "s", ID: "skip", Status: conformance.Skipped},
		{Scenario: "tasks-x", ID: "one", Status: conformance.Failure},
		{Scenario: "tasks-x", ID: "two", Status: conformance.Failure},
	}
	for _, tc := range []struct {
		name                         string
		baseline                     []string
		ok                           bool
		expected, unexpected, stale  []string
		wantPassed, wantFail, wantWr int
	}{
		{
			name:       "exact",
			baseline:   []string{"s:fail", "s:warn", "tasks-x"},
			ok:         true,
			expected:   []string{"s:fail", "s:warn", "tasks-x"},
			wantPassed: 1, wantFail: 3, wantWr: 1,
		},
		{
			name:       "a new failure",
			baseline:   []string{"s:fail", "tasks-x"},
			unexpected: []string{"s:warn"},
			expected:   []string{"s:fail", "tasks-x"},
			wantPassed: 1, wantFail: 3, wantWr: 1,
		},
		{
			name:       "fixed checks are stale, passed or skipped or gone",
			baseline:   []string{"s:fail", "s:warn", "s:pass", "s:skip", "s:gone", "other", "tasks-x:one", "tasks-x:two"},
			expected:   []string{"s:fail", "s:warn", "tasks-x:one", "tasks-x:two"},
			stale:      []string{"s:pass", "s:skip", "s:gone", "other"},
			wantPassed: 1, wantFail: 3, wantWr: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := conformance.Judge(checks, conformance.Baseline{Server: tc.baseline})
			if v.OK() != tc.ok || !slices.Equal(v.Expected, tc.expected) || !slices.Equal(v.Unexpected, tc.unexpected) || !slices.Equal(v.Stale, tc.stale) {
				t.Errorf("verdict %+v (ok %v)\nwant expected %q unexpected %q stale %q (ok %v)", v, v.OK(), tc.expected, tc.unexpected, tc.stale, tc.ok)
			}
			if v.Passed != tc.wantPassed || v.Failed != tc.wantFail || v.Warned != tc.wantWr {
				t.Errorf("counts %d/%d/%d, want %d/%d/%d", v.Passed, v.Failed, v.Warned, tc.wantPassed, tc.wantFail, tc.wantWr)
			}
		})
	}
}

func TestLoadBaseline(t *testing.T) {
	dir := t.TempDir()
	load := func(text string) (conformance.Baseline, error) {
		p := filepath.Join(dir, "b.yml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return conformance.LoadBaseline(p)
	}
	b, err := load("# comment\nserver:\n  - a:b  # why\n  - c\n")
	if err != nil || !slices.Equal(b.Server, []string{"a:b", "c"}) {
		t.Fatalf("baseline %+v, %v", b, err)
	}
	if b, err := load("server: []\n"); err != nil || len(b.Server) != 0 {
		t.Fatalf("empty baseline %+v, %v", b, err)
	}
	for name, text := range map[string]string{
		"empty check id":          "server: [\"a:\"]\n",
		"empty scenario":          "server: [\":b\"]\n",
		"duplicate":               "server: [a:b, a:b]\n",
		"redundant with scenario": "server: [a:b, a]\n",
		"not a list":              "server: a\n",
	} {
		if _, err := load(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The baselines in the repository load.
	for _, set := range requirementSets {
		p := filepath.Join("..", "..", "tools", "conformance", "baseline-"+set+".yml")
		b, err := conformance.LoadBaseline(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		for _, e := range b.Server {
			if !strings.Contains(e, ":") {
				t.Errorf("%s: %q names a whole scenario: list its failing checks", p, e)
			}
		}
	}
}
