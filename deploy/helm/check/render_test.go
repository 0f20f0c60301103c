package check

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

const (
	// chartDir is the chart under test, relative to this package.
	chartDir = "../mcpgrain"
	// repoRoot is the repository's root, relative to this package.
	repoRoot = "../../.."
	// release and namespace of every render.
	releaseName = "mcpgrain"
	namespace   = "mcpgrain"
)

// kubeVersions are the Kubernetes versions the chart is rendered for: the
// oldest its Chart.yaml accepts (lifecycle.preStop.sleep is on by default
// from 1.30) and the one of the API types these tests decode into.
var kubeVersions = []string{"v1.30.0", "v1.37.0"}

// scheme knows every kind the chart may render; decoding is strict.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

var strictDecoder = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

// rendered is one render of the chart: its objects, decoded.
type rendered struct {
	objects []runtime.Object
	// sources maps each object to the template it came from.
	sources map[runtime.Object]string
}

// loadChart loads the chart directory as helm install and helm package do.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return c
}

// valuesFile reads a values file of the chart ("" is none: the defaults).
func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	if name == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// withValues returns base with the dotted keys of set overriding it
// (like helm's --set, on a deep copy).
func withValues(base map[string]any, set map[string]any) map[string]any {
	out := deepCopy(base).(map[string]any)
	for key, v := range set {
		m := out
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// renderRaw renders c with vals for kubeVersion as helm install would
// (strict: a value the templates name but the values lack is an error)
// and returns the manifests by template name.
func renderRaw(c *chart.Chart, vals map[string]any, kubeVersion string) (map[string]string, error) {
	if !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, kubeVersion) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, not %s", c.Metadata.KubeVersion, kubeVersion)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: kubeVersion, Major: "1", Minor: strings.Split(kubeVersion, ".")[1]}
	top, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(c, top)
}

// render renders the chart and decodes every object strictly; any error
// fails the test.
func render(t *testing.T, c *chart.Chart, vals map[string]any) rendered {
	t.Helper()
	var first rendered
	for i, kv := range kubeVersions {
		files, err := renderRaw(c, vals, kv)
		if err != nil {
			t.Fatalf("render for Kubernetes %s: %v", kv, err)
		}
		r := decodeAll(t, files)
		if i == 0 {
			first = r
		} else if len(r.objects) != len(first.objects) {
			t.Fatalf("Kubernetes %s renders %d objects, %s %d", kv, len(r.objects), kubeVersions[0], len(first.objects))
		}
	}
	return first
}

// decodeAll decodes every YAML document of the rendered templates into its
// Kubernetes type, strictly: unknown fields, duplicate fields and unknown
// kinds are errors.
func decodeAll(t *testing.T, files map[string]string) rendered {
	t.Helper()
	r := rendered{sources: map[runtime.Object]string{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]string{}
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, helpers
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return strings.Compare(a, b) })
		for _, k := range keys {
			doc := docs[k]
			if isEmptyYAML(doc) {
				continue
			}
			obj, gvk, err := strictDecoder.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: not a valid Kubernetes object (strict decoding): %v\n%s", name, err, doc)
			}
			meta, err := metaOf(obj)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			id := gvk.Kind + "/" + meta
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s renders %s again (first in %s)", name, id, prev)
			}
			seen[id] = name
			r.objects = append(r.objects, obj)
			r.sources[obj] = name
		}
	}
	return r
}

// isEmptyYAML reports whether a document holds only comments and blanks.
func isEmptyYAML(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

// metaOf returns an object's namespace/name, and an error when it has no
// name or lives outside the release's namespace.
func metaOf(obj runtime.Object) (string, error) {
	m, ok := obj.(interface {
		GetName() string
		GetNamespace() string
	})
	if !ok {
		return "", fmt.Errorf("%T has no object metadata", obj)
	}
	if m.GetName() == "" {
		return "", fmt.Errorf("%T without a name", obj)
	}
	if m.GetNamespace() != namespace {
		return "", fmt.Errorf("%T %s: namespace %q, want the release's %q", obj, m.GetName(), m.GetNamespace(), namespace)
	}
	return m.GetNamespace() + "/" + m.GetName(), nil
}

// only returns the one object of type T, failing if there is not exactly
// one.
func only[T runtime.Object](t *testing.T, r rendered) T {
	t.Helper()
	all := all[T](r)
	if len(all) != 1 {
		var zero T
		t.Fatalf("want one %T, rendered %d", zero, len(all))
	}
	return all[0]
}

// all returns every rendered object of type T.
func all[T runtime.Object](r rendered) []T {
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// readRepoFile reads a file of the repository.
func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// equalBytes is bytes.Equal with a note on where they first differ.
func equalBytes(a, b []byte) (bool, string) {
	if bytes.Equal(a, b) {
		return true, ""
	}
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return false, fmt.Sprintf("first difference at byte %d (line %d)", i, bytes.Count(a[:i], []byte("\n"))+1)
		}
	}
	return false, fmt.Sprintf("lengths %d and %d", len(a), len(b))
}
