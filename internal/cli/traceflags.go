package cli

import (
	"flag"
	"fmt"

	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// traceFlags are the OpenTelemetry tracing flags of every serving command
// (the rest of the configuration is the standard OTEL_* environment; see
// docs/operations.md).
type traceFlags struct {
	endpoint      string
	toolArguments int
}

func (t *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.endpoint, "trace-endpoint", otlp.DefaultEndpoint,
		"OTLP endpoint URL to export OpenTelemetry spans to, e.g. http://127.0.0.1:4318 (read like OTEL_EXPORTER_OTLP_ENDPOINT; empty: tracing off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; protocol, sampler and resource from the OTEL_* environment)")
	fs.IntVar(&t.toolArguments, "trace-tool-arguments", otlp.DefaultToolArguments,
		"record a tools/call's arguments (their JSON, cut to at most this many bytes) on the gateway's span as gen_ai.tool.call.arguments; 0: never (arguments may carry secrets)")
}

func (t *traceFlags) validate() error {
	if t.toolArguments < 0 {
		return fmt.Errorf("%w: --trace-tool-arguments must not be negative", errUsage)
	}
	return nil
}
