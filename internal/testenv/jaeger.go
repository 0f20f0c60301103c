package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// JaegerVersion is the Jaeger release pinned by tools/jaeger/go.mod; the
// cached build lives in a directory named after it.
const JaegerVersion = "v1.75.0"

// jaegerReadyTimeout bounds how long StartJaeger waits for the query API.
const jaegerReadyTimeout = 60 * time.Second

var jaegerTool = pinnedTool{name: "jaeger", version: JaegerVersion, pkg: "github.com/jaegertracing/jaeger/cmd/jaeger", env: "MCPGRAIN_JAEGER_BIN",
	hint: "set MCPGRAIN_JAEGER_BIN or build it with tools/jaeger/build.sh (15-25 minutes)"}

// JaegerBinary returns the path of the Jaeger binary: $MCPGRAIN_JAEGER_BIN,
// else the cached build of tools/jaeger/build.sh. If neither exists, the
// integration tier builds it (many minutes); the default tier skips t.
func JaegerBinary(t testing.TB) string {
	t.Helper()
	return jaegerTool.binary(t)
}

// Jaeger is a Jaeger v2 all-in-one started by StartJaeger: spans kept in
// memory, OTLP/HTTP in and the query API on 127.0.0.1 ports of its own.
type Jaeger struct {
	bin, dir, logPath          string
	otlpPort, queryPort, qgrpc int
	cmd                        *exec.Cmd
	exited                     chan struct{}
}

// jaegerConfig is the collector configuration: OTLP/HTTP in, memory
// storage, the query API; no other listener.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// StartJaeger starts Jaeger for t (stopped when t ends) and waits until its
// query API answers.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	j := &Jaeger{bin: JaegerBinary(t), dir: t.TempDir()}
	j.logPath = filepath.Join(j.dir, "jaeger.log")
	t.Cleanup(func() {
		j.stop()
		if t.Failed() {
			t.Logf("jaeger log tail:\n%s", j.LogTail(60))
		}
	})
	var lastErr error
	for attempt := range 3 { // a chosen port may be taken before jaeger binds it
		ports, err := freePorts(3)
		if err != nil {
			t.Fatalf("find free ports: %v", err)
		}
		j.otlpPort, j.queryPort, j.qgrpc = ports[0], ports[1], ports[2]
		if lastErr = j.start(); lastErr == nil {
			return j
		}
		t.Logf("jaeger start attempt %d failed: %v", attempt+1, lastErr)
		j.stop()
	}
	t.Fatalf("start jaeger: %v\nlog tail:\n%s", lastErr, j.LogTail(60))
	return nil
}

func (j *Jaeger) start() error {
	config := filepath.Join(j.dir, "config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, jaegerConfig, j.queryPort, j.qgrpc, j.otlpPort), 0o644); err != nil {
		return err
	}
	logf, err := os.OpenFile(j.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(j.bin, "--config", config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", j.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	j.cmd, j.exited = cmd, exited
	return j.waitReady()
}

func (j *Jaeger) waitReady() error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(jaegerReadyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		var v struct{ Data []string }
		if lastErr = getJSON(client, j.QueryURL()+"/api/services", &v); lastErr == nil {
			return nil
		}
		select {
		case <-j.exited:
			return errors.New("jaeger exited during startup")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("jaeger query API at %s not ready after %s: %v", j.QueryURL(), jaegerReadyTimeout, lastErr)
}

func (j *Jaeger) stop() {
	if j.cmd == nil || j.cmd.Process == nil {
		return
	}
	_ = j.cmd.Process.Kill()
	<-j.exited
	j.cmd = nil
}

// OTLPEndpoint is the OTLP/HTTP endpoint URL nodes export spans to.
func (j *Jaeger) OTLPEndpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", j.otlpPort) }

// QueryURL is the base URL of Jaeger's query API and UI.
func (j *Jaeger) QueryURL() string { return fmt.Sprintf("http://127.0.0.1:%d", j.queryPort) }

// LogTail returns the last n lines of Jaeger's log.
func (j *Jaeger) LogTail(n int) string {
	b, _ := os.ReadFile(j.logPath)
	return tail(string(b), n)
}

// JaegerTrace is one trace as Jaeger's query API (/api/traces/{id})
// returns it.
type JaegerTrace struct {
	Spans []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []JaegerTag `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string      `json:"serviceName"`
		Tags        []JaegerTag `json:"tags"`
	} `json:"processes"`
}

// JaegerTag is a span's or process's tag.
type JaegerTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// Trace fetches the trace traceID (hex) from the query API; an error until
// Jaeger has it.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (JaegerTrace, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	var v struct{ Data []JaegerTrace }
	if err := getJSON(client, j.QueryURL()+"/api/traces/"+traceID, &v); err != nil {
		return JaegerTrace{}, err
	}
	if len(v.Data) != 1 {
		return JaegerTrace{}, fmt.Errorf("trace %s: %d traces in the answer", traceID, len(v.Data))
	}
	return v.Data[0], ctx.Err()
}

// Find searches the query API (/api/traces) for the traces of service
// that have a span named operation with all the tags (span attributes),
// in the last hour; none is not an error.
func (j *Jaeger) Find(ctx context.Context, service, operation string, tags map[string]string) ([]JaegerTrace, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	t, err := json.Marshal(tags)
	if err != nil {
		return nil, fmt.Errorf("jaeger: encode tags: %w", err)
	}
	q := url.Values{"service": {service}, "operation": {operation}, "tags": {string(t)},
		"lookback": {"1h"}, "limit": {"100"}}
	var v struct{ Data []JaegerTrace }
	if err := getJSON(client, j.QueryURL()+"/api/traces?"+q.Encode(), &v); err != nil {
		return nil, err
	}
	return v.Data, ctx.Err()
}
