package app

import (
	"context"
	"time"

	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// tracing turns OpenTelemetry tracing on when the configuration or the
// OTEL_* environment asks for it (package tracing/otlp), naming the node
// in every span's resource; spans still buffered are flushed when Run
// returns.
func (p *process) tracing(ctx context.Context) error {
	shutdown, err := otlp.Setup(ctx, otlp.Options{Endpoint: p.cfg.TraceEndpoint, Node: p.nodeID, ToolArguments: p.cfg.TraceToolArguments, Registerer: p.nodeReg})
	if err != nil {
		return err
	}
	if (otlp.Options{Endpoint: p.cfg.TraceEndpoint}).Enabled() {
		endpoint := p.cfg.TraceEndpoint
		if endpoint == "" {
			endpoint = "from OTEL_EXPORTER_OTLP_*"
		}
		p.log.Info("tracing on: exporting spans over OTLP", "endpoint", endpoint, "tool_arguments_bytes", p.cfg.TraceToolArguments)
	}
	p.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			p.log.Warn("tracing: last flush of spans", "err", err)
		}
	})
	return nil
}
