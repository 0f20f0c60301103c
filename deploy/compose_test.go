package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     any               `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	EnvFile     []string          `yaml:"env_file"`
}

// containerPort returns the container side of a "host:container" mapping.
func containerPort(mapping string) string {
	return mapping[strings.LastIndex(mapping, ":")+1:]
}

// nodeEnvNames returns the MCPGRAIN_* variables `mcpgrain node` reads: one
// per flag listed by `mcpgrain node -h`, plus those its help names
// (MCPGRAIN_KEYS).
func nodeEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(testcluster.Binary(t), "node", "-h").CombinedOutput() // -h exits non-zero
	flagLine := regexp.MustCompile(`^\s+-([a-z0-9-]+)`)
	mentioned := regexp.MustCompile(`MCPGRAIN_[A-Z0-9_]+`)
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
			names["MCPGRAIN_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
		}
		for _, m := range mentioned.FindAllString(sc.Text(), -1) {
			if m != "MCPGRAIN_" {
				names[m] = true
			}
		}
	}
	if !names["MCPGRAIN_STORE"] || !names["MCPGRAIN_CONSUL"] || len(names) < 20 {
		t.Fatalf("could not read the flags of `mcpgrain node -h` (%d found):\n%s", len(names), out)
	}
	return names
}

func TestCompose(t *testing.T) {
	var c composeFile
	readYAML(t, filepath.Join("..", "docker-compose.yml"), &c)
	root := ".."

	for _, name := range []string{"consul", "postgres", "node1", "node2", "node3", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no service %s", name)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s: neither image nor build", name)
		}
		if s.Build != nil {
			df := filepath.Join(root, s.Build.Context, s.Build.Dockerfile)
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s builds from a missing Dockerfile: %v", name, err)
			}
		}
		for _, f := range s.EnvFile {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("service %s: env_file: %v", name, err)
			}
		}
		for _, v := range s.Volumes {
			src, _, ok := strings.Cut(v, ":")
			if !ok {
				t.Errorf("service %s: volume %q has no container path", name, v)
				continue
			}
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("service %s mounts a missing path: %v", name, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("service %s: named volume %s is not declared", name, src)
			}
		}
	}

	// The nodes: real flags only, one cluster, distinct ids, reachable
	// advertised addresses, the secrets every node needs.
	env := nodeEnvNames(t)
	var prom promConfig
	readYAML(t, filepath.Join("prometheus", "prometheus.yml"), &prom)
	job := prom.job(t, "mcpgrain")
	ids := map[string]bool{}
	for _, name := range []string{"node1", "node2", "node3"} {
		s := c.Services[name]
		for k := range s.Environment {
			if strings.HasPrefix(k, "MCPGRAIN_") && !env[k] {
				t.Errorf("service %s sets %s, which is no flag of `mcpgrain node` (see mcpgrain node -h)", name, k)
			}
		}
		e := s.Environment
		for _, k := range []string{"MCPGRAIN_STORE", "MCPGRAIN_STATE_KEY", "MCPGRAIN_TOKEN", "MCPGRAIN_NODE_ID", "MCPGRAIN_ADVERTISE"} {
			if e[k] == "" {
				t.Errorf("service %s: %s is not set", name, k)
			}
		}
		if ids[e["MCPGRAIN_NODE_ID"]] {
			t.Errorf("service %s: node id %s is used twice", name, e["MCPGRAIN_NODE_ID"])
		}
		ids[e["MCPGRAIN_NODE_ID"]] = true
		if host, _, _ := net.SplitHostPort(e["MCPGRAIN_ADVERTISE"]); host != name {
			t.Errorf("service %s advertises %q: want its own service name as host", name, e["MCPGRAIN_ADVERTISE"])
		}
		if host, _, _ := net.SplitHostPort(e["MCPGRAIN_CONSUL"]); c.Services[host].Image == "" {
			t.Errorf("service %s: MCPGRAIN_CONSUL=%s is not a compose service", name, e["MCPGRAIN_CONSUL"])
		}
		// Prometheus scrapes <advertised host>:<port of MCPGRAIN_HTTP>; it
		// must listen on all interfaces and be the published port.
		host, port, err := net.SplitHostPort(e["MCPGRAIN_HTTP"])
		if err != nil || (host != "0.0.0.0" && host != "") {
			t.Errorf("service %s: MCPGRAIN_HTTP=%q must listen on all interfaces", name, e["MCPGRAIN_HTTP"])
		}
		if len(s.Ports) != 1 || containerPort(s.Ports[0]) != port {
			t.Errorf("service %s publishes %v, want the MCPGRAIN_HTTP port %s", name, s.Ports, port)
		}
		if e["MCPGRAIN_CLUSTER"] == "" || !slices.Equal(job.ConsulSD[0].Services, []string{e["MCPGRAIN_CLUSTER"]}) {
			t.Errorf("service %s joins cluster %q but Prometheus discovers %v", name, e["MCPGRAIN_CLUSTER"], job.ConsulSD[0].Services)
		}
		if got := job.ConsulSD[0].Server; got != e["MCPGRAIN_CONSUL"] {
			t.Errorf("Prometheus asks Consul at %s, node %s at %s", got, name, e["MCPGRAIN_CONSUL"])
		}
	}

	// Prometheus reads deploy/prometheus (config and rules) from its mount.
	p := c.Services["prometheus"]
	if !slices.Contains(p.Volumes, "./deploy/prometheus:/etc/prometheus:ro") {
		t.Errorf("prometheus does not mount deploy/prometheus at /etc/prometheus: %v", p.Volumes)
	}
	if args := fmt.Sprint(p.Command); !strings.Contains(args, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus command %s does not load /etc/prometheus/prometheus.yml", args)
	}
	// The image runs the Prometheus release the tests run (module
	// v0.X0Y.Z is release vX.Y.Z).
	if pinned, err := pinnedPrometheus(); err != nil {
		t.Error(err)
	} else {
		var major, minor, patch int
		if _, err := fmt.Sscanf(pinned, "v0.%d.%d", &minor, &patch); err != nil {
			t.Errorf("tools/prometheus/go.mod pins %s: not a v0.X0Y.Z module version", pinned)
		}
		major, minor = minor/100, minor%100
		if want := fmt.Sprintf("prom/prometheus:v%d.%d.%d", major, minor, patch); p.Image != want {
			t.Errorf("compose runs %s; the tests run module %s, i.e. %s", p.Image, pinned, want)
		}
	}
	for _, rf := range prom.RuleFiles {
		if _, err := os.Stat(filepath.Join("prometheus", rf)); err != nil {
			t.Errorf("prometheus.yml loads a missing rule file: %v", err)
		}
	}

	// Grafana: provisioning mounted, the dashboard provider's path is the
	// mount holding the dashboard, the data source is the prometheus
	// service.
	g := c.Services["grafana"]
	for _, want := range []string{
		"./deploy/grafana/provisioning:/etc/grafana/provisioning:ro",
		"./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro",
	} {
		if !slices.Contains(g.Volumes, want) {
			t.Errorf("grafana does not mount %s: %v", want, g.Volumes)
		}
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/mcpgrain.yml", &provider)
	if len(provider.Providers) != 1 || provider.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider %+v: want path /var/lib/grafana/dashboards", provider.Providers)
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yml", &ds)
	wantURL := "http://prometheus:" + containerPort(p.Ports[0])
	if len(ds.Datasources) != 1 || ds.Datasources[0].UID != "prometheus" || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != wantURL {
		t.Errorf("data sources %+v: want one prometheus data source, uid prometheus (the dashboard's default), at %s", ds.Datasources, wantURL)
	}
}

// promConfig is the part of prometheus.yml the tests read.
type promConfig struct {
	RuleFiles     []string  `yaml:"rule_files"`
	ScrapeConfigs []promJob `yaml:"scrape_configs"`
}

// promJob is one scrape config of prometheus.yml.
type promJob struct {
	JobName  string `yaml:"job_name"`
	ConsulSD []struct {
		Server   string   `yaml:"server"`
		Services []string `yaml:"services"`
	} `yaml:"consul_sd_configs"`
}

func (p promConfig) job(t *testing.T, name string) promJob {
	t.Helper()
	for _, j := range p.ScrapeConfigs {
		if j.JobName == name && len(j.ConsulSD) == 1 {
			return j
		}
	}
	t.Fatalf("prometheus.yml has no job %s with one consul_sd_configs entry", name)
	panic("unreachable")
}

// TestDockerfileBuildsLikeCI: the image's binary is built by exactly the
// command .ci/run builds and checks, and the image is static and non-root.
func TestDockerfileBuildsLikeCI(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	dockerBuild := buildLines(string(df))
	ciBuild := buildLines(string(ci))
	if len(dockerBuild) != 1 || len(ciBuild) != 1 {
		t.Fatalf("want one `CGO_ENABLED=0 go build` in deploy/Dockerfile (found %q) and in .ci/run (found %q)", dockerBuild, ciBuild)
	}
	if !slices.Equal(dockerBuild[0], ciBuild[0]) {
		t.Errorf("deploy/Dockerfile builds with\n  %q\nbut .ci/run with\n  %q", dockerBuild[0], ciBuild[0])
	}
	text := string(df)
	for _, want := range []string{"FROM gcr.io/distroless/static", "USER nonroot"} {
		if !strings.Contains(text, want) {
			t.Errorf("deploy/Dockerfile: no %q (static, non-root image)", want)
		}
	}
	// The builder image's Go is the go.mod toolchain's minor version.
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	img := regexp.MustCompile(`(?m)^FROM golang:(\d+\.\d+)\S* AS build`).FindStringSubmatch(text)
	if goLine == nil || img == nil || goLine[1] != img[1] {
		t.Errorf("go.mod wants go %v, the Dockerfile builds with golang:%v", goLine, img)
	}
}

// buildLines returns the words of every `CGO_ENABLED=0 go build` command in
// a Dockerfile or shell script, with the -o argument replaced by OUT
// (quotes removed).
func buildLines(text string) [][]string {
	var out [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "RUN "))
		if !strings.HasPrefix(line, "CGO_ENABLED=0 go build") {
			continue
		}
		words := strings.Fields(strings.NewReplacer(`'`, "", `"`, "").Replace(line))
		for i := range words {
			if i > 0 && words[i-1] == "-o" {
				words[i] = "OUT"
			}
		}
		out = append(out, words)
	}
	return out
}
