package deploy

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jaegerV2For is the Jaeger v2 release paired with a v1 module version
// (Jaeger releases them together: v1.74.0 / v2.11.0, v1.75.0 / v2.12.0).
func jaegerV2For(v1 string) (string, error) {
	var minor, patch int
	if _, err := fmt.Sscanf(v1, "v1.%d.%d", &minor, &patch); err != nil {
		return "", fmt.Errorf("jaeger module version %s: not v1.X.Y", v1)
	}
	return fmt.Sprintf("2.%d.%d", minor-63, patch), nil
}

// pinnedJaeger is the Jaeger module version tools/jaeger/go.mod pins.
func pinnedJaeger() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "tools", "jaeger", "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "github.com/jaegertracing/jaeger":
			return f[1], nil
		case len(f) >= 3 && f[0] == "require" && f[1] == "github.com/jaegertracing/jaeger":
			return f[2], nil
		}
	}
	return "", fmt.Errorf("tools/jaeger/go.mod requires no github.com/jaegertracing/jaeger")
}

// Compose runs Jaeger, the release the tests run, and every node exports
// its spans to it over OTLP/HTTP.
func TestComposeTracesToJaeger(t *testing.T) {
	var c composeFile
	readYAML(t, filepath.Join("..", "docker-compose.yml"), &c)
	j, ok := c.Services["jaeger"]
	if !ok {
		t.Fatal("docker-compose.yml has no service jaeger")
	}
	v1, err := pinnedJaeger()
	if err != nil {
		t.Fatal(err)
	}
	v2, err := jaegerV2For(v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "jaegertracing/jaeger:" + v2; j.Image != want {
		t.Errorf("compose runs %s; the tests run module %s, i.e. %s", j.Image, v1, want)
	}
	if len(j.Ports) != 1 || containerPort(j.Ports[0]) != "16686" {
		t.Errorf("jaeger publishes %v, want its UI port 16686", j.Ports)
	}
	for _, name := range []string{"node1", "node2", "node3"} {
		u, err := url.Parse(c.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
		if err != nil || u.Scheme != "http" || u.Hostname() != "jaeger" || u.Port() != "4318" {
			t.Errorf("service %s: OTEL_EXPORTER_OTLP_ENDPOINT=%q, want http://jaeger:4318 (OTLP/HTTP)", name, c.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
		}
	}
}

func TestJaegerV2For(t *testing.T) {
	for v1, want := range map[string]string{"v1.74.0": "2.11.0", "v1.75.0": "2.12.0"} {
		if got, err := jaegerV2For(v1); err != nil || got != want {
			t.Errorf("jaegerV2For(%s) = %s, %v; want %s", v1, got, err, want)
		}
	}
}
