// Package otlp builds a node's tracer provider, exporting spans over
// OTLP, configured the standard way: the OTEL_* environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER[_ARG],
// OTEL_SDK_DISABLED) and the node's --trace-endpoint flag. It is apart
// from package tracing so that the packages that record spans do not link
// the SDK and its exporters.
package otlp

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// DefaultServiceName is the service.name of a node's spans unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const DefaultServiceName = "mcpgrain"

// NodeKey is the span resource attribute naming the cluster node that
// recorded a span (besides service.instance.id, which is the same name).
const NodeKey = attribute.Key("mcpgrain.node")

// DefaultEndpoint is the node's --trace-endpoint unless set: none, so
// tracing is off unless the OTEL_EXPORTER_OTLP_* environment names an
// endpoint.
const DefaultEndpoint = ""

// DefaultToolArguments is the node's --trace-tool-arguments unless set:
// no span records a tool call's arguments.
const DefaultToolArguments = 0

// Options configures Setup. The zero value leaves tracing off unless the
// OTLP endpoint is set in the environment.
type Options struct {
	// Endpoint is the OTLP endpoint URL spans are exported to (the node's
	// --trace-endpoint), e.g. http://collector:4318 for OTLP/HTTP or
	// http://collector:4317 with OTEL_EXPORTER_OTLP_PROTOCOL=grpc; read
	// like OTEL_EXPORTER_OTLP_ENDPOINT (over HTTP a URL without a path
	// gets /v1/traces). Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
	// when set, else tracing stays off.
	Endpoint string
	// Node is the node's name, recorded as service.instance.id and
	// mcpgrain.node on every span.
	Node string
	// ToolArguments is tracing.Options.ToolArguments: the most bytes of a
	// tools/call's arguments its gateway span records (zero:
	// DefaultToolArguments, none).
	ToolArguments int
	// Registerer, when set, gets mcpgrain_trace_spans_dropped_total: the
	// ended spans dropped because the export buffer was full (nil: the
	// count is only in the shutdown's report).
	Registerer prometheus.Registerer
}

// Enabled reports whether o (with the environment) turns tracing on.
func (o Options) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return o.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Setup installs the global tracer provider and the W3C propagators
// (traceparent, tracestate, baggage) when o turns tracing on, and returns
// the function that flushes and stops it. With tracing off it changes
// nothing and its shutdown does nothing. The sampler comes from
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default: parent-based,
// always on); the resource from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES over service.name=mcpgrain. The provider is
// process-wide (otel's global): with several nodes in one process the
// last Setup wins.
func Setup(ctx context.Context, o Options) (shutdown func(context.Context) error, err error) {
	if !o.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := exporter(ctx, o.Endpoint)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceNameKey.String(DefaultServiceName),
			semconv.ServiceInstanceIDKey.String(o.Node), NodeKey.String(o.Node)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	b := NewBatcher(exp, BatchOptionsFromEnv())
	if o.Registerer != nil {
		if err := o.Registerer.Register(DroppedSpans(b)); err != nil {
			return nil, fmt.Errorf("tracing: register the dropped-spans counter: %w", err)
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithResource(res))
	uninstall := tracing.InstallWith(tp, tracing.Options{ToolArguments: o.ToolArguments})
	return func(ctx context.Context) error {
		uninstall()
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: shutdown: %w", err)
		}
		return nil
	}, nil
}

// exporter is the OTLP span exporter for endpoint (empty: the
// environment's), over the protocol OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL names (default http/protobuf).
func exporter(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		if endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(endpoint)))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q not supported (want http/protobuf or grpc)", proto)
	}
}

// httpTracesURL is the OTLP/HTTP traces URL of endpoint, read like
// OTEL_EXPORTER_OTLP_ENDPOINT: a base URL without a path gets the traces
// path /v1/traces; one with a path is used as it is.
func httpTracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint // the exporter reports a bad URL
	}
	u.Path = "/v1/traces"
	return u.String()
}
