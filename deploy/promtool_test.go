package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// prometheusTool returns the path of the pinned prometheus or promtool
// build (tools/prometheus/build.sh): from $MCPGRAIN_PROMETHEUS_DIR, else
// the build cache. Debian's prometheus package is not used: it lacks
// Consul service discovery. Without the binaries the test skips (fails
// under MCPGRAIN_INTEGRATION=1).
func prometheusTool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("MCPGRAIN_PROMETHEUS_DIR")
	if dir == "" {
		version, err := pinnedPrometheus()
		if err != nil {
			t.Fatal(err)
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			testenv.Unavailable(t, "no %s: set MCPGRAIN_PROMETHEUS_DIR (tools/prometheus/build.sh prints it): %v", name, err)
		}
		dir = filepath.Join(cache, "mcpgrain", "prometheus-"+version)
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		testenv.Unavailable(t, "no %s at %s: run tools/prometheus/build.sh (builds it once, minutes) or set MCPGRAIN_PROMETHEUS_DIR", name, p)
	}
	return p
}

// pinnedPrometheus returns the Prometheus module version pinned by
// tools/prometheus/go.mod.
func pinnedPrometheus() (string, error) {
	f, err := os.Open(filepath.Join("..", "tools", "prometheus", "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) == 3 && w[0] == "require" && w[1] == "github.com/prometheus/prometheus" {
			return w[2], nil
		}
	}
	return "", fmt.Errorf("tools/prometheus/go.mod: no `require github.com/prometheus/prometheus <version>` line")
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(prometheusTool(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestPromtool checks the Prometheus config and rules with promtool, runs
// the rules' unit tests, and parses every dashboard query as PromQL.
func TestPromtool(t *testing.T) {
	prometheusTool(t, "promtool") // skip early without it
	t.Run("check config", func(t *testing.T) {
		promtool(t, "check", "config", filepath.Join("prometheus", "prometheus.yml"))
	})
	t.Run("check rules", func(t *testing.T) {
		promtool(t, "check", "rules", filepath.Join("prometheus", "alerts.yml"))
	})
	t.Run("test rules", func(t *testing.T) {
		promtool(t, "test", "rules", filepath.Join("prometheus", "alerts_test.yml"))
	})
	t.Run("dashboard queries parse", func(t *testing.T) {
		// Each query becomes a recording rule, with Grafana's variables
		// replaced by what they expand to.
		expand := strings.NewReplacer(`$node`, `.*`, `$__rate_interval`, `1m`, `$__interval`, `15s`, `$__range`, `1h`)
		type rule struct {
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		}
		var rules []rule
		for _, p := range leafPanels(loadDashboard(t).Panels) {
			for _, tg := range p.Targets {
				rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d:%s", p.ID, tg.RefID), Expr: expand.Replace(tg.Expr)})
			}
		}
		b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		promtool(t, "check", "rules", "--lint=none", path)
	})
}
