package check

import (
	"path"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// node is the rendered StatefulSet, its pod template and its mcpgrain
// container.
type node struct {
	sts       *appsv1.StatefulSet
	pod       *corev1.PodSpec
	container *corev1.Container
}

func nodeOf(t *testing.T, r rendered) node {
	t.Helper()
	sts := only[*appsv1.StatefulSet](t, r)
	pod := &sts.Spec.Template.Spec
	for i := range pod.Containers {
		if pod.Containers[i].Name == "mcpgrain" {
			return node{sts: sts, pod: pod, container: &pod.Containers[i]}
		}
	}
	t.Fatalf("StatefulSet %s has no container mcpgrain", sts.Name)
	panic("unreachable")
}

// flags returns the node's --name=value arguments by name, failing on a
// command other than node, an argument of another form, or a flag given
// twice.
func (n node) flags(t *testing.T) map[string]string {
	t.Helper()
	args := n.container.Args
	if len(n.container.Command) != 0 {
		t.Errorf("the container overrides the image's entrypoint: %q", n.container.Command)
	}
	if len(args) == 0 || args[0] != "node" {
		t.Fatalf("container args %q: want the node command first", args)
	}
	out := map[string]string{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("argument %q: want --name=value", a)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("--%s is given twice: %q", name, args)
		}
		out[name] = value
	}
	return out
}

// env returns the container's variable by name.
func (n node) env(name string) (corev1.EnvVar, bool) {
	for _, e := range n.container.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// port returns the container port with that name.
func (n node) port(t *testing.T, name string) int32 {
	t.Helper()
	for _, p := range n.container.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("the container has no port named %q: %+v", name, n.container.Ports)
	return 0
}

// secretFile is where a file of the container comes from: a key of a
// Secret.
type secretFile struct {
	secret, key string
	mode        int32
}

// fileSource resolves an absolute file path of the container to the
// Secret key mounted there, through its volume mounts and secret or
// projected volumes.
func (n node) fileSource(t *testing.T, file string) (secretFile, bool) {
	t.Helper()
	for _, m := range n.container.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("volume %s at %s holds secrets but is mounted writable", m.Name, m.MountPath)
		}
		for _, v := range n.pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				for _, it := range v.Secret.Items {
					if path.Clean(it.Path) == rel {
						return secretFile{secret: v.Secret.SecretName, key: it.Key, mode: deref(v.Secret.DefaultMode)}, true
					}
				}
			case v.Projected != nil:
				for _, src := range v.Projected.Sources {
					if src.Secret == nil {
						continue
					}
					for _, it := range src.Secret.Items {
						if path.Clean(it.Path) == rel {
							return secretFile{secret: src.Secret.Name, key: it.Key, mode: deref(v.Projected.DefaultMode)}, true
						}
					}
				}
			}
		}
	}
	return secretFile{}, false
}

func deref(p *int32) int32 {
	if p == nil {
		return 0o644 // the API's default
	}
	return *p
}

// varRef matches a $(VAR) reference the kubelet expands in args.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand expands $(VAR) references as the kubelet does, with the given
// values for the downward-API variables.
func (n node) expand(t *testing.T, s string, values map[string]string) string {
	t.Helper()
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := varRef.FindStringSubmatch(ref)[1]
		if v, ok := values[name]; ok {
			return v
		}
		if e, ok := n.env(name); ok && e.ValueFrom == nil {
			return e.Value
		}
		t.Fatalf("%q references $(%s), which the test has no value for", s, name)
		return ""
	})
}
