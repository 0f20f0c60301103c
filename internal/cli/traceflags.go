package cli

import (
	"flag"

	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// traceFlags are the OpenTelemetry tracing flags of every serving command
// (the rest of the configuration is the standard OTEL_* environment; see
// docs/operations.md).
type traceFlags struct {
	endpoint string
}

func (t *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.endpoint, "trace-endpoint", otlp.DefaultEndpoint,
		"OTLP endpoint URL to export OpenTelemetry spans to, e.g. http://127.0.0.1:4318 (read like OTEL_EXPORTER_OTLP_ENDPOINT; empty: tracing off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; protocol, sampler and resource from the OTEL_* environment)")
}
