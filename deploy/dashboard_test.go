package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

const dashboardPath = "grafana/dashboards/mcpgrain.json"

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashTarget struct {
	Datasource *dsRef `json:"datasource"`
	RefID      string `json:"refId"`
	Expr       string `json:"expr"`
}

type dashPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Datasource *dsRef                   `json:"datasource"`
	Targets    []dashTarget             `json:"targets"`
	Panels     []dashPanel              `json:"panels"`
}

type dashVar struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *dsRef          `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	Multi      bool            `json:"multi"`
	AllValue   string          `json:"allValue"`
}

type dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []dashVar `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// leafPanels returns every non-row panel, including those inside
// collapsed rows.
func leafPanels(ps []dashPanel) []dashPanel {
	var out []dashPanel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, leafPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// dashboardVariables are the $variables panel queries may use: the
// dashboard's own and Grafana's built-in interval variables.
var dashboardBuiltins = []string{"__rate_interval", "__interval", "__range"}

var variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	documented := documentedMetrics(t)
	if d.UID != "mcpgrain" || d.Title == "" {
		t.Errorf("uid %q title %q: want uid mcpgrain and a title", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion %d: want a Grafana 10/11 dashboard (36..41)", d.SchemaVersion)
	}

	vars := map[string]dashVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("want a datasource variable of plugin prometheus, got %+v", v)
	}
	node, ok := vars["node"]
	if !ok {
		t.Fatal("no node variable")
	}
	var q struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(node.Query, &q); err != nil {
		t.Errorf("node variable query: %v", err)
	}
	const want = "label_values(mcpgrain_build_info, node)"
	if node.Type != "query" || q.Query != want || node.Definition != want {
		t.Errorf("node variable: type %q query %q definition %q, want query %q", node.Type, q.Query, node.Definition, want)
	}
	if !node.IncludeAll || !node.Multi || node.AllValue != ".*" {
		t.Errorf("node variable: includeAll %v multi %v allValue %q; want a multi-select with All = .*", node.IncludeAll, node.Multi, node.AllValue)
	}
	if why := undocumented(documented, "mcpgrain_build_info"); why != "" {
		t.Errorf("node variable: %s", why)
	}
	if node.Datasource == nil || node.Datasource.UID != "${datasource}" {
		t.Errorf("node variable datasource %+v: want uid ${datasource}", node.Datasource)
	}

	ids := map[int]string{}
	var check func(ps []dashPanel)
	check = func(ps []dashPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d missing or also used by %q", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
			}
			check(p.Panels)
		}
	}
	check(d.Panels)

	used := map[string]bool{}
	exprs := 0
	for _, p := range leafPanels(d.Panels) {
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			exprs++
			where := fmt.Sprintf("panel %q query %s", p.Title, tg.RefID)
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId missing or repeated", where)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource %+v, want uid ${datasource}", where, tg.Datasource)
			}
			for _, m := range variableRef.FindAllStringSubmatch(tg.Expr, -1) {
				if _, ok := vars[m[1]]; !ok && !slices.Contains(dashboardBuiltins, m[1]) {
					t.Errorf("%s: unknown variable $%s", where, m[1])
				}
			}
			sels, err := selectors(tg.Expr)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if len(sels) == 0 {
				t.Errorf("%s: %q references no metric", where, tg.Expr)
			}
			for _, s := range sels {
				used[s.Metric] = true
				if why := undocumented(documented, s.Metric); why != "" {
					t.Errorf("%s: %s", where, why)
				}
				// Every series is per node: the node picker must apply.
				if !strings.Contains(s.Matchers, `node=~"$node"`) {
					t.Errorf("%s: %s{%s} does not filter on node=~\"$node\"", where, s.Metric, s.Matchers)
				}
			}
		}
	}
	t.Logf("%d panels, %d queries, %d metrics", len(leafPanels(d.Panels)), exprs, len(used))

	// What the dashboard is for: residency per node, disposals, restores,
	// approvals, reminder tardiness, gateway traffic by era, resume
	// forwards, the cluster.
	for _, m := range []string{
		"mcpgrain_resident_runtimes", "mcpgrain_resident_runtimes_peak",
		"mcpgrain_resident_evictable", "mcpgrain_resident_pinned",
		"mcpgrain_resident_eviction_pending", "mcpgrain_in_flight_cold_builds",
		"mcpgrain_cap_overflow_total", "mcpgrain_runtime_disposals_total",
		"mcpgrain_session_restore_seconds_bucket",
		"mcpgrain_paused_executions", "mcpgrain_approval_leases", "mcpgrain_approvals_total",
		"mcpgrain_reminder_tardiness_seconds_bucket",
		"mcpgrain_gateway_requests_total", "mcpgrain_gateway_request_seconds_bucket",
		"mcpgrain_resume_forwards_total",
		"mcpgrain_cluster_members", "mcpgrain_grain_requests_total",
	} {
		if !used[m] {
			t.Errorf("the dashboard does not chart %s", m)
		}
	}
	all, _ := os.ReadFile(dashboardPath)
	for _, want := range []string{`outcome=\"timeout\"`, `sum by (reason)`, `sum by (era)`, `code=~\"[45]..\"`} {
		if !strings.Contains(string(all), want) {
			t.Errorf("the dashboard has no query with %s", want)
		}
	}
}

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestAlertRules(t *testing.T) {
	var rf ruleFile
	readYAML(t, filepath.Join("prometheus", "alerts.yml"), &rf)
	documented := documentedMetrics(t)
	alerts := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
				continue
			}
			if _, dup := alerts[r.Alert]; dup {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts[r.Alert] = r.Expr
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want summary and description annotations", r.Alert)
			}
			sels, err := selectors(r.Expr)
			if err != nil || len(sels) == 0 {
				t.Errorf("alert %s: expr %q: %v (%d metrics)", r.Alert, r.Expr, err, len(sels))
			}
			for _, s := range sels {
				if why := undocumented(documented, s.Metric); why != "" {
					t.Errorf("alert %s: %s", r.Alert, why)
				}
			}
		}
	}
	// The alerts the operations issue asks for, by what they watch.
	for name, metric := range map[string]string{
		"McpgrainCapOverflowSustained":   "mcpgrain_cap_overflow_total",
		"McpgrainReminderTardiness":      "mcpgrain_reminder_tardiness_seconds_bucket",
		"McpgrainRestartEnvelopes":       "mcpgrain_gateway_requests_total",
		"McpgrainGrainRequestRetries":    "mcpgrain_grain_request_retries_total",
		"McpgrainNodeDown":               "up",
		"McpgrainMembershipLapse":        "mcpgrain_cluster_membership_lapses_total",
		"McpgrainMembershipDisagreement": "mcpgrain_cluster_members",
	} {
		expr, ok := alerts[name]
		if !ok {
			t.Errorf("no alert %s", name)
			continue
		}
		if !strings.Contains(expr, metric) {
			t.Errorf("alert %s does not watch %s: %s", name, metric, expr)
		}
	}
	if !strings.Contains(alerts["McpgrainRestartEnvelopes"], `code="503"`) {
		t.Errorf("McpgrainRestartEnvelopes must watch the gateway's 503s: %s", alerts["McpgrainRestartEnvelopes"])
	}
}
