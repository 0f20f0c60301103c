package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStoreCost measures what each session lifecycle operation costs the
// Postgres store: statements (writes, reads, transaction control), rows
// written by table, WAL bytes, the node's bytes and round trips to the
// server, and the server's CPU — per operation, from Postgres's own
// counters (pg_stat_statements, pg_current_wal_lsn), /proc of the server's
// processes and a counting TCP tap between node and server.
//
// It needs MCPGRAIN_STORECOST_URL: a Postgres server on this machine with
// pg_stat_statements preloaded, in which it creates (and drops) a database
// of its own; tools/storecost/postgres.sh starts a private one (a shared
// server's WAL and CPU carry everyone's load). MCPGRAIN_STORECOST_N sets the
// operations per kind (default 200), MCPGRAIN_STORECOST_ROUNDS the repeats
// (default 1). It logs the table and asserts no performance figure; it
// fails only if an operation fails.
func TestStoreCost(t *testing.T) {
	admin := os.Getenv("MCPGRAIN_STORECOST_URL")
	if admin == "" {
		t.Skip("set MCPGRAIN_STORECOST_URL to a Postgres with pg_stat_statements (tools/storecost/postgres.sh start)")
	}
	n, rounds := envInt(t, "MCPGRAIN_STORECOST_N", 200), envInt(t, "MCPGRAIN_STORECOST_ROUNDS", 1)
	ctx := t.Context()
	probe, nodeDSN, wire := storeCostSetup(ctx, t, admin)
	var all []opCost
	for r := range rounds {
		costs := storeCostRound(ctx, t, probe, nodeDSN, wire, n)
		t.Logf("round %d of %d, %d operations per kind:\n%s", r+1, rounds, n, costTable(costs))
		all = append(all, costs...)
	}
	t.Logf("statements per operation (last round):\n%s", costStatements(all[len(all)-len(all)/rounds:]))
	t.Logf("the node's tables after the run (%d rounds):\n%s", rounds, tableSummary(ctx, t, admin, probe.dbname))
	if rounds > 1 {
		t.Logf("server CPU µs per operation over %d rounds (min / median / max):\n%s", rounds, cpuSpread(all))
	}
}

// tableSummary is each table of the node's database: its size on disk and
// the rows inserted, updated (of which HOT: no index touched) and deleted
// over the run, from pg_stat_user_tables (flushed by the backends when
// idle: the node is stopped by now).
func tableSummary(ctx context.Context, t *testing.T, admin, dbname string) string {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return err.Error()
	}
	cfg.Database = dbname
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `
SELECT relname, pg_total_relation_size(relid), n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_live_tup
FROM pg_stat_user_tables ORDER BY pg_total_relation_size(relid) DESC`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %10s %9s %9s %9s %9s %9s\n", "table", "bytes", "inserted", "updated", "HOT", "deleted", "live")
	for rows.Next() {
		var name string
		var size, ins, upd, hot, del, live int64
		if err := rows.Scan(&name, &size, &ins, &upd, &hot, &del, &live); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%-22s %10d %9d %9d %9d %9d %9d\n", name, size, ins, upd, hot, del, live)
	}
	if err := rows.Err(); err != nil {
		t.Logf("table summary: %v", err)
	}
	return b.String()
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// storeCostSetup creates the run's database, the tap in front of the
// server and the probe; it returns the node's DSN (through the tap).
func storeCostSetup(ctx context.Context, t *testing.T, admin string) (*pgProbe, string, *wireProxy) {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("MCPGRAIN_STORECOST_URL: %v", err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	dbname := fmt.Sprintf("storecost_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+dbname); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP DATABASE "+dbname+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", dbname, err)
		}
	})
	var backend int
	if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatalf("backend pid: %v", err)
	}
	probe := &pgProbe{db: db, dbname: dbname, postmaster: postmasterOf(backend)}
	if probe.postmaster == 0 {
		t.Log("the server's processes are not visible in /proc: no CPU figures")
	}
	if _, err := probe.sample(ctx, wireCounts{}); err != nil {
		t.Fatalf("%v (preload pg_stat_statements and CREATE EXTENSION pg_stat_statements: tools/storecost/postgres.sh does)", err)
	}
	wire, err := newWireProxy(fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wire.close)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("MCPGRAIN_STORECOST_URL: %v", err)
	}
	u.Host, u.Path = wire.addr(), "/"+dbname
	return probe, u.String(), wire
}

// storeCostRound runs every operation kind n times and returns their costs.
func storeCostRound(ctx context.Context, t *testing.T, probe *pgProbe, dsn string, wire *wireProxy, n int) []opCost {
	const conc = 4
	measure := func(op string, ops int, f func() error) opCost {
		t.Helper()
		a, err := probe.sample(ctx, wire.counts())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		elapsed := time.Since(start)
		b, err := probe.sample(ctx, wire.counts())
		if err != nil {
			t.Fatal(err)
		}
		return costOf(op, ops, elapsed, a, b)
	}
	node, err := startNode(ctx, NodeOptions{SoftCap: 4*n + 64, Store: dsn}, 2*n)
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	warm(ctx, t, node)
	var costs []opCost
	// The node's background work (reminder polls, sweeps) with no load,
	// per second: it is inside every figure below, over each one's time.
	costs = append(costs, measure("idle (per s)", 3, func() error { time.Sleep(3 * time.Second); return nil }))
	var sessions []*mcp.ClientSession
	costs = append(costs, measure("create", n, func() (err error) {
		sessions, _, err = openSessions(ctx, node, n, conc)
		return err
	}))
	costs = append(costs, measure("call (warm)", n, func() error {
		return each(n, conc, func(i int) error { return echo(ctx, sessions[i]) })
	}))
	// A correctness count, not a figure: a call that changes no session
	// state saves no session record.
	if w := costs[len(costs)-1].CallsByTab["grains"]; w != 0 {
		t.Errorf("warm echo calls wrote the grains table %.2f times per call, want 0 (an unchanged state writes nothing)", w)
	}
	ids := make([]string, n)
	costs = append(costs, measure("execute (n paused)", n, func() error {
		return each(n, conc, func(i int) (err error) { ids[i], err = executePaused(ctx, sessions[i]); return err })
	}))
	costs = append(costs, measure("approve (dormant)", n, func() error {
		return each(n, conc, func(i int) error { return approveHTTP(ctx, node, ids[i]) })
	}))
	costs = append(costs, measure("resume (dormant)", n, func() error {
		return each(n, conc, func(i int) error { return resumeApproved(ctx, sessions[i], ids[i]) })
	}))
	// The cycle as a model drives it, each decided while its execution
	// is parked (above, n pauses outstanding go dormant: their approval
	// replays the run from the journal).
	costs = append(costs, measure("approve cycle", n, func() error {
		return each(n, conc, func(i int) error { return approveCycle(ctx, node, sessions[i]) })
	}))
	// A task's life in the 2026-07-28 era (no session): created, run and
	// polled by tasks/get to completed; then one that pauses (its
	// input_required) and is accepted by its client's tasks/update.
	var polls taskPolls
	costs = append(costs, measure("task (run, polled)", n, func() error {
		return each(n, conc, func(int) error { return taskRun(ctx, node, &polls) })
	}))
	t.Logf("task phase: %.2f tasks/get a task", float64(polls.n.Swap(0))/float64(n))
	costs = append(costs, measure("task approve cycle", n, func() error {
		return each(n, conc, func(int) error { return taskApproveCycle(ctx, node, &polls) })
	}))
	t.Logf("task approve phase: %.2f tasks/get a task", float64(polls.n.Swap(0))/float64(n))
	costs = append(costs, measure("delete", n, func() error {
		return each(n, conc, func(i int) error { return sessions[i].Close() })
	}))
	node.close()
	costs = append(costs, restoreCost(ctx, t, dsn, n, measure))
	// The server's CPU with the node idle (its polls, the server's own
	// background) is taken out of each figure, over the figure's time.
	perSecond := costs[0].CPU // the idle phase's operation is a second
	for i := range costs[1:] {
		c := &costs[i+1]
		c.CPU -= time.Duration(float64(perSecond) * c.Elapsed.Seconds() / float64(c.N))
	}
	return costs
}

// restoreCost measures cold calls: 16 sessions round robin on a node whose
// soft cap is 4, so each call restores its session and evicts (passivates)
// another.
func restoreCost(ctx context.Context, t *testing.T, dsn string, n int, measure func(string, int, func() error) opCost) opCost {
	node, err := startNode(ctx, NodeOptions{SoftCap: 4, Store: dsn}, 32)
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	defer node.close()
	sessions, _, err := openSessions(ctx, node, 16, 4)
	if err != nil {
		t.Fatalf("restore sessions: %v", err)
	}
	before, err := scrape(ctx, node.hc, node.base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	c := measure("call (restore+passivate)", n, func() error {
		var next atomic.Int64
		return each(n, 1, func(int) error { return echo(ctx, sessions[next.Add(1)%16]) })
	})
	after, err := scrape(ctx, node.hc, node.base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	r := restoreCounters(after).sub(restoreCounters(before))
	t.Logf("restore phase: %d calls, %.0f activations (cold restores), %.0f cap evictions", n, r.Activations, r.CapDisposals)
	closeSessions(sessions, 4)
	return c
}

// warm runs a few of each operation before measuring (connections opened,
// statements prepared).
func warm(ctx context.Context, t *testing.T, node *target) {
	sessions, _, err := openSessions(ctx, node, 8, 4)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	err = each(8, 4, func(i int) error {
		if err := echo(ctx, sessions[i]); err != nil {
			return err
		}
		return approveCycle(ctx, node, sessions[i])
	})
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	closeSessions(sessions, 4)
}

// each runs f(0..n-1) from conc workers and returns the first error.
func each(n, conc int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// costTable formats costs one line per operation.
func costTable(costs []opCost) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %6s %6s %6s %6s %6s %7s %8s %8s %8s %7s %8s\n", "operation", "stmts", "writes", "reads", "tx", "other", "rows", "WAL B", "sent B", "recv B", "trips", "CPU µs")
	for _, c := range costs {
		s := c.Statements
		all := s["write"] + s["read"] + s["tx"] + s["other"]
		fmt.Fprintf(&b, "%-26s %6.2f %6.2f %6.2f %6.2f %6.2f %7.2f %8.0f %8.0f %8.0f %7.2f %8.0f\n", c.Op, all, s["write"], s["read"], s["tx"], s["other"],
			c.Rows, c.WAL, c.Sent, c.Received, c.Trips, float64(c.CPU.Microseconds()))
	}
	return b.String()
}

// costStatements lists each operation's statements and rows by table.
func costStatements(costs []opCost) string {
	var b strings.Builder
	for _, c := range costs {
		fmt.Fprintf(&b, "%s (%d in %v):\n", c.Op, c.N, c.Elapsed.Round(time.Millisecond))
		var tabs []string
		for tab := range c.RowsByTab {
			tabs = append(tabs, tab)
		}
		sort.Strings(tabs)
		for _, tab := range tabs {
			fmt.Fprintf(&b, "  rows written to %s: %.2f in %.2f statements\n", tab, c.RowsByTab[tab], c.CallsByTab[tab])
		}
		for _, l := range c.Top {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// cpuSpread is each operation's server CPU over the rounds.
func cpuSpread(all []opCost) string {
	by := map[string][]float64{}
	var order []string
	for _, c := range all {
		if _, ok := by[c.Op]; !ok {
			order = append(order, c.Op)
		}
		by[c.Op] = append(by[c.Op], float64(c.CPU.Microseconds()))
	}
	var b strings.Builder
	for _, op := range order {
		v := by[op]
		sort.Float64s(v)
		fmt.Fprintf(&b, "%-26s %8.0f %8.0f %8.0f\n", op, v[0], v[len(v)/2], v[len(v)-1])
	}
	return b.String()
}

func TestStmtClass(t *testing.T) {
	cases := []struct{ query, class, table string }{
		{"INSERT INTO grains (grain) VALUES ($1) ON CONFLICT (grain) DO UPDATE SET epoch = grains.epoch + 1", "write", "grains"},
		{"\n  UPDATE grains SET record = $1 WHERE grain = $2", "write", "grains"},
		{"DELETE FROM reminders WHERE grain = $1", "write", "reminders"},
		{"INSERT INTO execution_journal (run_id) SELECT $1 WHERE EXISTS (SELECT 1 FROM execution_runs)", "write", "execution_journal"},
		{"WITH g AS (UPDATE grains SET epoch = 2 RETURNING epoch) SELECT epoch FROM g", "write", "grains"},
		{"SELECT name FROM reminders WHERE grain = $1", "read", "reminders"},
		{"select 1", "read", ""},
		{"begin", "tx", ""},
		{"COMMIT", "tx", ""},
		{"SET search_path = x", "other", ""},
	}
	for _, c := range cases {
		if class, table := stmtClass(c.query); class != c.class || table != c.table {
			t.Errorf("stmtClass(%q) = %q, %q; want %q, %q", c.query, class, table, c.class, c.table)
		}
	}
}
