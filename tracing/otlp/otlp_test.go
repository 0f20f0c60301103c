package otlp

import "testing"

func TestHTTPTracesURLAppendsTheSignalPathToABaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":           "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":          "http://127.0.0.1:4318/v1/traces",
		"https://collector/custom/traces": "https://collector/custom/traces",
	} {
		if got := httpTracesURL(in); got != want {
			t.Errorf("httpTracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOffWithoutAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if (Options{}).Enabled() {
		t.Error("tracing on with no endpoint")
	}
	if !(Options{Endpoint: "http://x:4318"}).Enabled() {
		t.Error("tracing off with an endpoint")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (Options{Endpoint: "http://x:4318"}).Enabled() {
		t.Error("tracing on with OTEL_SDK_DISABLED=true")
	}
}
