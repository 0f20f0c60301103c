package check

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
)

const (
	// programCase names the render of an SDK program's image: the chart
	// with examples/hello/values.yaml.
	programCase = "an SDK program's image (examples/hello/values.yaml)"
	// programPkg is that program's package in the repository.
	programPkg = "./examples/hello"
)

// programValues reads examples/hello/values.yaml, the values docs/guide.md
// shows for a program's own image.
func programValues(t *testing.T) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(repoRoot, "examples", "hello", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// TestProgramImage: the chart runs an SDK program's image as it runs
// mcpgrain's — the image's entrypoint (the program: no command is set)
// with "node" and the node flags, the program's pack selected by --tools
// — and with node.tools "" it passes no --tools, so the program serves
// its own default (its pack and Server.With). The structural tests
// (probes, drain, advertise, secrets, selectors) render the same values
// as one of their cases.
func TestProgramImage(t *testing.T) {
	c := loadChart(t)
	n := nodeOf(t, render(t, c, programValues(t)))
	if got, want := n.container.Image, "registry.example.com/hello:1.0.0"; got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	if len(n.container.Command) != 0 {
		t.Errorf("command %q: the chart must run the image's entrypoint (the program)", n.container.Command)
	}
	if len(n.container.Args) == 0 || n.container.Args[0] != "node" {
		t.Errorf("args %q: want the node command first", n.container.Args)
	}
	f := n.flags(t)
	if f["tools"] != "hello,code" || f["cluster"] != "hello" {
		t.Errorf("--tools=%q --cluster=%q: want the program's pack with code mode, in its own Consul service", f["tools"], f["cluster"])
	}
	for name, p := range map[string]*corev1.Probe{"startup": n.container.StartupProbe, "liveness": n.container.LivenessProbe, "readiness": n.container.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v: want the node's HTTP port", name, p)
		}
	}

	n = nodeOf(t, render(t, c, withValues(programValues(t), map[string]any{"node.tools": ""})))
	if _, ok := n.flags(t)["tools"]; ok {
		t.Errorf("node.tools \"\" passes --tools (args %q): want the program's default", n.container.Args)
	}
}

// TestArgsAreProgramFlags: every argument the pods pass in every case is a
// flag of the SDK program's node command too (examples/hello node -h):
// the chart works for any program calling mcpgrain.Main.
func TestArgsAreProgramFlags(t *testing.T) {
	known := programNodeFlags(t, programBinary(t, programPkg))
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			for flag := range nodeOf(t, render(t, c, vals)).flags(t) {
				if !known[flag] {
					t.Errorf("--%s is no flag of `hello node` (an SDK program)", flag)
				}
			}
		})
	}
}

// TestGuideInstallRenders: the install docs/guide.md ("Deploy it") shows —
// examples/hello/values.yaml with the Secret named on the command line —
// renders, and the pods read that Secret.
func TestGuideInstallRenders(t *testing.T) {
	c := loadChart(t)
	r := render(t, c, withValues(programValues(t), map[string]any{"secrets.existingSecret": "hello-secrets"}))
	n := nodeOf(t, r)
	found := false
	for _, v := range n.pod.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			found = found || (src.Secret != nil && src.Secret.Name == "hello-secrets")
		}
	}
	if !found {
		t.Errorf("no volume of the pods reads Secret hello-secrets: %+v", n.pod.Volumes)
	}
}
