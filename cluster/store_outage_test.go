package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Regression (chaos "postgres" round): a grain whose store connection dies
// mid-request — Postgres terminating the session, as every restart does —
// failed with a non-retryable CODE_INTERNAL. Now the write's outcome is
// reported as unknown to a non-idempotent caller, and an idempotent request
// is retried on a fresh connection. The fault is real: the grain's save is
// held on a row lock and its backend terminated with pg_terminate_backend,
// which is what a restart does to every session.
func TestStoreConnectionLostMidRequest(t *testing.T) {
	const app = "mcpgrain-outage-test"
	dsn := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dsn+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := prometheus.NewRegistry()
	node := startNode(t, cluster.Config{
		Kinds:      []grain.Kind{probe.Kind(probe.Options{})},
		Membership: membership.NewNetwork().Provider(),
		Store:      st,
		Registerer: reg,
	})
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// The lock is held on its own connection: inside a transaction,
	// pg_stat_activity is a snapshot taken once.
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())

	add(t, node, "p1", 1)
	// cutMidSave runs request while the grain's save waits on a row lock,
	// terminates the waiting backend, then lets the row go.
	cutMidSave := func(request func() error) error {
		t.Helper()
		tx, err := locker.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT 1 FROM grains WHERE grain = $1 FOR UPDATE", grain.Key(probe.KindName, "p1")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- request() }()
		var pid int
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&pid)
			if err == nil {
				break
			}
			if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
				t.Fatalf("the grain's save never waited on the lock: %v", err)
			}
			select {
			case err := <-done:
				t.Fatalf("request finished without waiting on the lock: %v", err)
			case <-time.After(2 * time.Millisecond):
			}
		}
		var terminated bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&terminated); err != nil || !terminated {
			t.Fatalf("terminate backend %d: %v %v", pid, terminated, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		return <-done
	}

	err = cutMidSave(func() error {
		_, err := node.Request(ctx, probe.KindName, "p1", &pb.ProbeAdd{Delta: 1})
		return err
	})
	if !errors.Is(err, cluster.ErrUnknownOutcome) || !strings.Contains(err.Error(), "store") {
		t.Fatalf("non-idempotent request whose store connection died: %v, want an unknown outcome naming the store", err)
	}
	if _, isGrain := grain.AsError(err); isGrain {
		t.Fatalf("unknown outcome reads as a plain grain failure: %v", err)
	}
	// The terminated statement was rolled back; the activation serves on.
	if got := add(t, node, "p1", 0).GetCount(); got != 1 {
		t.Fatalf("count after the lost write: %d, want 1", got)
	}

	before := metricSum(t, reg, "mcpgrain_grain_request_retries_total", "store_unavailable")
	err = cutMidSave(func() error {
		_, err := node.Request(ctx, probe.KindName, "p1", &pb.ProbeAdd{Delta: 1}, cluster.Idempotent())
		return err
	})
	if err != nil {
		t.Fatalf("idempotent request through a lost store connection: %v, want it retried", err)
	}
	if got := add(t, node, "p1", 0).GetCount(); got != 2 {
		t.Fatalf("count after the retried write: %d, want 2", got)
	}
	if after := metricSum(t, reg, "mcpgrain_grain_request_retries_total", "store_unavailable"); after != before+1 {
		t.Fatalf("store_unavailable retries: %v → %v, want one more", before, after)
	}
}

// metricSum sums the samples of name that carry labelValue in any label.
func metricSum(t *testing.T, reg *prometheus.Registry, name, labelValue string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == labelValue {
					sum += m.GetCounter().GetValue()
					break
				}
			}
		}
	}
	return sum
}
