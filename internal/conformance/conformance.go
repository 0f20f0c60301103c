// Package conformance judges a run of the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in tools/conformance) against an
// expected-failures baseline, check by check.
//
// The suite writes one checks.json per scenario it ran (`conformance server
// -o DIR`); [ReadResults] reads them back, and [Judge] compares the failing
// checks with a [Baseline]: the suite's own expected-failures file, a YAML
// list of "scenario" and "scenario:check-id" entries under `server:`.
//
// The suite checks its baseline too (--expected-failures), but with
// --requirements it only looks at the scored scenarios: a pending or
// extension scenario (tasks-*) may fail or start passing unseen. Judge looks
// at every scenario that ran, and it is stricter about a stale entry: an
// expected failure is stale as soon as its check does not fail, whether the
// check passed, was skipped or no longer ran. So the baseline lists exactly
// what fails today and shrinks as fixes land.
//
// It runs no processes: the test that drives a cluster through the suite
// lives in this package's tests (behind the integration helper).
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Check statuses the suite reports.
const (
	Success = "SUCCESS"
	Failure = "FAILURE"
	Warning = "WARNING"
	Skipped = "SKIPPED"
	Info    = "INFO"
)

// Check is one check of one scenario, as the suite wrote it.
type Check struct {
	// Scenario is the scenario that ran the check (from its result
	// directory's name).
	Scenario string `json:"-"`
	// ID is the suite's check id (e.g. "sep-2575-http-server-error-jsonrpc-id").
	ID string `json:"id"`
	// Status is SUCCESS, FAILURE, WARNING, SKIPPED or INFO.
	Status string `json:"status"`
	// ErrorMessage is the suite's explanation of a failure or warning.
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// Key is the check's baseline entry: "scenario:check-id".
func (c Check) Key() string { return c.Scenario + ":" + c.ID }

// Failing reports whether the suite counts the check against a baseline:
// a FAILURE or a WARNING.
func (c Check) Failing() bool { return c.Status == Failure || c.Status == Warning }

// resultDir is the name the suite gives a scenario's result directory:
// server-<scenario>-<ISO timestamp with ':' and '.' as '-'>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// ReadResults reads the checks of every server scenario the suite wrote
// under dir, sorted by scenario and check id. A check id reported more than
// once in a scenario keeps its worst status, as the suite's own baseline
// check does (FAILURE, then WARNING, then SUCCESS, then SKIPPED); INFO
// checks are dropped.
func ReadResults(dir string) ([]Check, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Check
	seen := map[string]bool{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		scenario := m[1]
		if seen[scenario] {
			return nil, fmt.Errorf("conformance: scenario %s has two result directories in %s", scenario, dir)
		}
		seen[scenario] = true
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // skipped: not applicable at the requested version
		}
		if err != nil {
			return nil, err
		}
		var checks []Check
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("conformance: %s: %w", e.Name(), err)
		}
		out = append(out, worst(scenario, checks)...)
	}
	slices.SortFunc(out, func(a, b Check) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}

// severity orders statuses for [worst].
func severity(status string) int {
	switch status {
	case Failure:
		return 4
	case Warning:
		return 3
	case Success:
		return 2
	default:
		return 1
	}
}

// worst keeps, for each check id of a scenario, the report with the worst
// status.
func worst(scenario string, checks []Check) []Check {
	byID := map[string]int{}
	var out []Check
	for _, c := range checks {
		if c.Status == Info {
			continue
		}
		c.Scenario = scenario
		i, ok := byID[c.ID]
		if !ok {
			byID[c.ID] = len(out)
			out = append(out, c)
			continue
		}
		if severity(c.Status) > severity(out[i].Status) {
			out[i] = c
		}
	}
	return out
}

// Baseline is an expected-failures file in the suite's format. Only the
// server list is used here.
type Baseline struct {
	// Server lists the expected failures: "scenario" (some check of the
	// scenario fails) or "scenario:check-id" (that check fails).
	Server []string `yaml:"server"`
}

// LoadBaseline reads an expected-failures file and checks its entries.
func LoadBaseline(path string) (Baseline, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Baseline{}, err
	}
	var b Baseline
	if err := yaml.Unmarshal(raw, &b); err != nil {
		return Baseline{}, fmt.Errorf("conformance: %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, e := range b.Server {
		scenario, _, _ := strings.Cut(e, ":")
		if scenario == "" || strings.HasSuffix(e, ":") {
			return Baseline{}, fmt.Errorf("conformance: %s: entry %q is not 'scenario' or 'scenario:check-id'", path, e)
		}
		if seen[e] {
			return Baseline{}, fmt.Errorf("conformance: %s: entry %q is listed twice", path, e)
		}
		seen[e] = true
	}
	for _, e := range b.Server {
		if scenario, _, ok := strings.Cut(e, ":"); ok && seen[scenario] {
			return Baseline{}, fmt.Errorf("conformance: %s: %q is redundant: the whole scenario %s is expected to fail", path, e, scenario)
		}
	}
	return b, nil
}

// Verdict is the outcome of [Judge].
type Verdict struct {
	// Passed, Failed and Warned count the checks by status (SKIPPED and
	// INFO are not counted).
	Passed, Failed, Warned int
	// Expected are the baseline entries that fail, as expected.
	Expected []string
	// Unexpected are the failing checks the baseline does not list
	// ("scenario:check-id").
	Unexpected []string
	// Stale are the baseline entries that no longer fail (their check
	// passed, was skipped or did not run): remove them from the baseline.
	Stale []string
}

// OK reports whether the run matches the baseline exactly.
func (v Verdict) OK() bool { return len(v.Unexpected) == 0 && len(v.Stale) == 0 }

// Judge compares the checks of a run with the baseline.
func Judge(checks []Check, b Baseline) Verdict {
	var v Verdict
	failing := map[string]bool{} // scenario and scenario:check-id
	for _, c := range checks {
		switch c.Status {
		case Success:
			v.Passed++
		case Failure:
			v.Failed++
		case Warning:
			v.Warned++
		}
		if c.Failing() {
			failing[c.Key()] = true
			failing[c.Scenario] = true
		}
	}
	listed := map[string]bool{}
	for _, e := range b.Server {
		listed[e] = true
		if failing[e] {
			v.Expected = append(v.Expected, e)
		} else {
			v.Stale = append(v.Stale, e)
		}
	}
	for _, c := range checks {
		if c.Failing() && !listed[c.Key()] && !listed[c.Scenario] {
			v.Unexpected = append(v.Unexpected, c.Key())
		}
	}
	return v
}
