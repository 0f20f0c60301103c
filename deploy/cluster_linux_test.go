package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// localPrometheusConfig returns deploy/prometheus/prometheus.yml for a
// cluster on this machine: the scrape job, its Consul service discovery
// and its relabelling are kept as they are; only the Consul address, the
// intervals and the rule file's location change.
func localPrometheusConfig(t *testing.T, consulAddr string) []byte {
	t.Helper()
	var cfg map[string]any
	readYAML(t, filepath.Join("prometheus", "prometheus.yml"), &cfg)
	global, _ := cfg["global"].(map[string]any)
	if global == nil {
		t.Fatal("prometheus.yml: no global section")
	}
	global["scrape_interval"], global["evaluation_interval"] = "1s", "1s"
	alerts, err := filepath.Abs(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg["rule_files"] = []string{alerts}
	jobs, _ := cfg["scrape_configs"].([]any)
	replaced := 0
	for _, j := range jobs {
		job, _ := j.(map[string]any)
		sds, _ := job["consul_sd_configs"].([]any)
		for _, sd := range sds {
			sd.(map[string]any)["server"] = consulAddr
			replaced++
		}
	}
	if replaced != 1 {
		t.Fatalf("prometheus.yml: %d consul_sd_configs entries, want 1", replaced)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// promSample is one sample of an instant query result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func promQuery(base, query string) ([]promSample, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %w", query, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, body.Error)
	}
	return body.Data.Result, nil
}

// byNode maps each sample's node label to its value.
func byNode(samples []promSample) map[string]string {
	out := map[string]string{}
	for _, s := range samples {
		v, _ := s.Value[1].(string)
		out[s.Metric["node"]] = v
	}
	return out
}

// TestPrometheusScrapesClusterViaConsul runs the compose topology without
// containers: a real Consul agent, Postgres, three `mcpgrain node`
// processes and a real Prometheus using deploy/prometheus/prometheus.yml.
// Prometheus must find all three nodes through Consul (no static targets),
// scrape each at its gateway address and label it with its node id.
func TestPrometheusScrapesClusterViaConsul(t *testing.T) {
	prom := prometheusTool(t, "prometheus")
	c := testcluster.Start(t, testcluster.Options{Nodes: 3})

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, localPrometheusConfig(t, c.Consul.Addr()), 0o644); err != nil {
		t.Fatal(err)
	}
	web := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web,
		"--log.level=debug",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("---- prometheus log (tail) ----\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	base := "http://" + web

	want := map[string]string{} // node id → gateway address
	for _, n := range c.Nodes() {
		want[n.ID] = n.HTTP
	}
	wantIDs := make([]string, 0, len(want))
	for id := range want {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(wantIDs)

	// poll runs check until it returns nil, Prometheus exits or the
	// deadline passes.
	poll := func(what string, timeout time.Duration, check func() error) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		var last error
		for {
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("prometheus exited (%v) while waiting for %s", err, what)
			default:
			}
			if last = check(); last == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %v", what, timeout, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	start := time.Now()
	poll("three targets up, found through Consul", 60*time.Second, func() error {
		up, err := promQuery(base, `up{job="mcpgrain"}`)
		if err != nil {
			return err
		}
		got := byNode(up)
		var ids []string
		for id, v := range got {
			if v != "1" {
				return fmt.Errorf("up{node=%q} = %s", id, v)
			}
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if !slices.Equal(ids, wantIDs) {
			return fmt.Errorf("up for nodes %v, want %v", ids, wantIDs)
		}
		// Scraped at the gateway address: service host + meta "http" port.
		for _, s := range up {
			if s.Metric["instance"] != want[s.Metric["node"]] {
				return fmt.Errorf("node %s scraped at %s, want its gateway %s", s.Metric["node"], s.Metric["instance"], want[s.Metric["node"]])
			}
		}
		return nil
	})
	t.Logf("Prometheus found and scraped %d nodes through Consul in %s", len(wantIDs), time.Since(start).Round(time.Millisecond))

	// The nodes' own series keep their node label (honor_labels): each
	// node reports the full membership.
	poll("mcpgrain_cluster_members from every node", 30*time.Second, func() error {
		members, err := promQuery(base, `mcpgrain_cluster_members`)
		if err != nil {
			return err
		}
		got := byNode(members)
		for _, id := range wantIDs {
			if got[id] != "3" {
				return fmt.Errorf("mcpgrain_cluster_members by node = %v, want 3 for each of %v", got, wantIDs)
			}
		}
		if len(got) != len(wantIDs) {
			return fmt.Errorf("mcpgrain_cluster_members by node = %v, want only %v", got, wantIDs)
		}
		for _, s := range members {
			if _, renamed := s.Metric["exported_node"]; renamed {
				return fmt.Errorf("node label renamed: %v", s.Metric)
			}
		}
		return nil
	})

	// The alert rules load and evaluate against real series without error.
	poll("alert rules evaluated", 30*time.Second, func() error {
		resp, err := http.Get(base + "/api/v1/rules?type=alert")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Groups []struct {
					Name  string `json:"name"`
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
						State     string `json:"state"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		var rf ruleFile
		readYAML(t, filepath.Join("prometheus", "alerts.yml"), &rf)
		if len(body.Data.Groups) != len(rf.Groups) {
			return fmt.Errorf("%d rule groups loaded, want %d", len(body.Data.Groups), len(rf.Groups))
		}
		for _, g := range body.Data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return fmt.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
				}
				if r.State == "firing" {
					return fmt.Errorf("rule %s fires on a healthy cluster", r.Name)
				}
			}
		}
		return nil
	})
}
