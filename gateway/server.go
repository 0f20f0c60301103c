package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Options configure the gateway's HTTP handler.
type Options struct {
	// Node is the cluster node requests are routed through (required).
	Node *cluster.Node
	// Gatherer serves /metrics (required).
	Gatherer prometheus.Gatherer
	// Logger logs request failures. Default slog.Default().
	Logger *slog.Logger
	// EnableProbe serves POST /debug/probe/{id}. Default off.
	EnableProbe bool
	// EnablePprof serves Go's profiler at /debug/pprof/. Default off.
	EnablePprof bool
	// ReadyTimeout bounds the store check of /readyz. Default 2s.
	ReadyTimeout time.Duration
	// MCP serves the MCP endpoint at /mcp when set.
	MCP *MCPOptions
	// Mount, when set, adds more routes (approvals, the demo API) to the
	// gateway's mux.
	Mount func(mux *http.ServeMux) error
}

// NewHandler returns the gateway's HTTP handler.
func NewHandler(o Options) (http.Handler, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Second
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "node": o.Node.ID()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { ready(w, r, o) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}))
	if o.EnableProbe {
		mux.HandleFunc("POST /debug/probe/{id}", func(w http.ResponseWriter, r *http.Request) { probeHandler(w, r, o) })
		mux.HandleFunc("POST /debug/probe/{id}/reminders", func(w http.ResponseWriter, r *http.Request) { probeRemindHandler(w, r, o) })
	}
	if o.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if o.MCP != nil {
		h, err := newMCPHandler(o.Node, o.Logger, *o.MCP)
		if err != nil {
			return nil, err
		}
		mux.Handle("/mcp", h)
	}
	if o.Mount != nil {
		if err := o.Mount(mux); err != nil {
			return nil, err
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
	})
	return mux, nil
}

func ready(w http.ResponseWriter, r *http.Request, o Options) {
	view := o.Node.View()
	body := map[string]any{"node": o.Node.ID(), "members": len(view.Members)}
	if !o.Node.Member() {
		body["status"], body["reason"] = "not_ready", "this node is not in its own membership view"
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), o.ReadyTimeout)
	defer cancel()
	if err := o.Node.Store().Ping(ctx); err != nil {
		body["status"], body["reason"] = "not_ready", "store unreachable"
		o.Logger.Warn("readyz: store unreachable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["status"] = "ready"
	writeJSON(w, http.StatusOK, body)
}

func probeHandler(w http.ResponseWriter, r *http.Request, o Options) {
	var delta int64
	if d := r.URL.Query().Get("delta"); d != "" {
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "delta must be an integer"})
			return
		}
		delta = v
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "probe id must be 1-256 characters"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var opts []cluster.CallOption
	if delta == 0 {
		opts = append(opts, cluster.Idempotent())
	}
	res, err := o.Node.Request(ctx, probe.KindName, id, &pb.ProbeAdd{Delta: delta}, opts...)
	if err != nil {
		status, retryable := http.StatusServiceUnavailable, true
		if ge, ok := grain.AsError(err); ok {
			retryable = ge.Retryable()
			if ge.Code == pb.GrainError_CODE_REJECTED {
				status = http.StatusBadRequest
			}
		}
		if errors.Is(err, cluster.ErrUnknownOutcome) {
			status = http.StatusGatewayTimeout
		}
		writeJSON(w, status, map[string]any{"error": err.Error(), "retryable": retryable})
		return
	}
	st, ok := res.(*pb.ProbeState)
	if !ok {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "unexpected probe reply"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": st.GetNode(), "epoch": st.GetEpoch(), "count": st.GetCount(), "served": st.GetServed(), "via": o.Node.ID()})
}

// probeRemindBody is the JSON body of POST /debug/probe/{id}/reminders.
type probeRemindBody struct {
	Reminders []struct {
		Name     string `json:"name"`
		DueAtMs  int64  `json:"due_at_ms"`
		PeriodMs int64  `json:"period_ms"`
	} `json:"reminders"`
}

func probeRemindHandler(w http.ResponseWriter, r *http.Request, o Options) {
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "probe id must be 1-256 characters"})
		return
	}
	var body probeRemindBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid body: " + err.Error()})
		return
	}
	msg := &pb.ProbeRemind{}
	for _, rem := range body.Reminders {
		msg.Reminders = append(msg.Reminders, &pb.ProbeReminder{Name: rem.Name, DueAtMs: rem.DueAtMs, PeriodMs: rem.PeriodMs})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if _, err := o.Node.Request(ctx, probe.KindName, id, msg); err != nil {
		status := http.StatusServiceUnavailable
		if ge, ok := grain.AsError(err); ok && ge.Code == pb.GrainError_CODE_REJECTED {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"registered": len(msg.Reminders)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
