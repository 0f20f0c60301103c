package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

func TestReadyDecision(t *testing.T) {
	const grace = 5 * time.Second
	cases := []struct {
		name         string
		member       bool
		draining     bool
		storeFailing bool
		failingFor   time.Duration
		ready        bool
		reason       string
	}{
		{"member, store answers", true, false, false, 0, true, ""},
		{"not in its own view", false, false, false, 0, false, "this node is not in its own membership view"},
		{"not a member and store down", false, false, true, time.Minute, false, "this node is not in its own membership view"},
		{"store blip (a database restart)", true, false, true, 800 * time.Millisecond, true, ""},
		{"store down just under the grace", true, false, true, grace - time.Millisecond, true, ""},
		{"store down for the grace", true, false, true, grace, false, "store unreachable"},
		{"store down for long", true, false, true, time.Hour, false, "store unreachable"},
		{"draining", true, true, false, 0, false, "draining: this node is stopping"},
		{"draining, already out of its view", false, true, false, 0, false, "draining: this node is stopping"},
	}
	for _, c := range cases {
		ready, reason := readyDecision(c.member, c.draining, c.storeFailing, c.failingFor, grace)
		if ready != c.ready || reason != c.reason {
			t.Errorf("%s: ready=%v %q, want %v %q", c.name, ready, reason, c.ready, c.reason)
		}
	}
}

// hangingStore is a real (SQLite) store whose Ping can be made to hang
// until its context ends, as a database that stopped answering does.
// (A fault injected in-process: a hung store under one node's readiness
// check alone cannot be produced with the shared test Postgres.)
type hangingStore struct {
	store.Store
	hang atomic.Bool
}

func (s *hangingStore) Ping(ctx context.Context) error {
	if s.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Ping(ctx)
}

// Regression (chaos, Postgres restarts): /readyz waited for the store's
// answer (up to ReadyTimeout), so a balancer's short probe timeout failed
// every node at once while the database restarted, whatever the grace,
// and clients got "no healthy gateway". /readyz now answers at once from
// a store check made in the background.
func TestReadyzAnswersAtOnceWhileTheStoreHangs(t *testing.T) {
	inner, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	st := &hangingStore{Store: inner}
	node, err := cluster.Start(context.Background(), cluster.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop(context.Background()) })
	const readyTimeout, grace = 5 * time.Second, 3 * time.Second
	h, err := NewHandler(Options{Node: node, Gatherer: prometheus.NewRegistry(), ReadyTimeout: readyTimeout, StoreGrace: grace,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	probe := func() (int, time.Duration) {
		t.Helper()
		began := time.Now()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(began)
	}
	if code, _ := probe(); code != http.StatusOK {
		t.Fatalf("healthy node: %d", code)
	}
	st.hang.Store(true)
	began := time.Now()
	sawReadyWhileHanging := false
	for {
		code, took := probe()
		// Waiting for the hung store would take readyTimeout (5 s).
		if took >= readyTimeout/2 {
			t.Fatalf("/readyz took %s while the store hung: it waited for the store", took)
		}
		if code == http.StatusOK {
			sawReadyWhileHanging = true
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(began) > 3*readyTimeout {
			t.Fatal("/readyz never reported the hung store")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawReadyWhileHanging {
		t.Fatal("/readyz failed at once: no grace for a store blip")
	}
	st.hang.Store(false)
	for code, _ := probe(); code != http.StatusOK; code, _ = probe() {
		if time.Since(began) > 6*readyTimeout {
			t.Fatal("/readyz did not recover with the store")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
