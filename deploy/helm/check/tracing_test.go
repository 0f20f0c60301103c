package check

import (
	"strings"
	"testing"
)

// The tracing values become the node's standard OTEL_* variables, and
// none is set while tracing.endpoint is empty (tracing off).
func TestTracingWiring(t *testing.T) {
	c := loadChart(t)
	off := nodeOf(t, render(t, c, valuesFile(t, "")))
	for _, e := range off.container.Env {
		if len(e.Name) > 5 && e.Name[:5] == "OTEL_" {
			t.Errorf("tracing off sets %s=%q", e.Name, e.Value)
		}
	}
	on := nodeOf(t, render(t, c, withValues(valuesFile(t, ""), map[string]any{
		"tracing.endpoint":           "http://jaeger-collector.tracing:4317",
		"tracing.protocol":           "grpc",
		"tracing.sampler":            "parentbased_traceidratio",
		"tracing.samplerArg":         "0.25",
		"tracing.serviceName":        "mcpgrain-prod",
		"tracing.resourceAttributes": map[string]any{"deployment.environment": "prod"},
	})))
	want := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger-collector.tracing:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.25",
		"OTEL_SERVICE_NAME":           "mcpgrain-prod",
		"OTEL_RESOURCE_ATTRIBUTES":    "k8s.namespace.name=mcpgrain,k8s.pod.name=$(POD_NAME),deployment.environment=prod",
	}
	for name, v := range want {
		if e, ok := on.env(name); !ok || e.Value != v {
			t.Errorf("%s = %q (set: %v), want %q", name, e.Value, ok, v)
		}
	}
	// $(POD_NAME) is expanded by Kubernetes only if POD_NAME comes first.
	pod, attrs := -1, -1
	for i, e := range on.container.Env {
		switch e.Name {
		case "POD_NAME":
			pod = i
		case "OTEL_RESOURCE_ATTRIBUTES":
			attrs = i
		}
	}
	if pod < 0 || pod > attrs {
		t.Errorf("POD_NAME (%d) must come before OTEL_RESOURCE_ATTRIBUTES (%d)", pod, attrs)
	}
}

// tracing.toolArguments is the node's --trace-tool-arguments, absent at its
// default (0: no tool arguments on spans).
func TestTracingToolArgumentsWiring(t *testing.T) {
	c := loadChart(t)
	has := func(n node) (string, bool) {
		for _, a := range n.container.Args {
			if strings.HasPrefix(a, "--trace-tool-arguments") {
				return a, true
			}
		}
		return "", false
	}
	if a, ok := has(nodeOf(t, render(t, c, valuesFile(t, "")))); ok {
		t.Errorf("default values render %s", a)
	}
	on := nodeOf(t, render(t, c, withValues(valuesFile(t, ""), map[string]any{
		"tracing.endpoint": "http://jaeger-collector.tracing:4318", "tracing.toolArguments": 2048})))
	if a, _ := has(on); a != "--trace-tool-arguments=2048" {
		t.Errorf("tracing.toolArguments 2048 renders %q, want --trace-tool-arguments=2048", a)
	}
}
